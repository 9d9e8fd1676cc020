#version 450
// sprite: a soft disc, its opacity a function of the pixel centre alone (gl_FragCoord is the pixel
// centre without multisampling), so the CPU reference evaluates the same function at the same
// points. Output is premultiplied; the blend is ONE, ONE_MINUS_SRC_ALPHA (back-to-front "over").

layout(location = 0) flat in vec4 v_color;
layout(location = 1) flat in vec3 v_disc;

layout(location = 0) out vec4 out_color;

void main() {
    vec2 d = gl_FragCoord.xy - v_disc.xy;
    float q = max(1.0 - dot(d, d) / (v_disc.z * v_disc.z), 0.0);
    float alpha = v_color.a * q * q;
    out_color = vec4(v_color.rgb * alpha, alpha);
}
