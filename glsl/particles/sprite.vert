#version 450
// sprite: instance i draws the particle at sorted slot i (indices were sorted with their depth
// keys, back to front) as a camera-facing quad, a triangle strip of 4 vertices reaching one pixel
// past the disc, so that every pixel centre the disc covers is rasterized whatever the edge rules.
#extension GL_GOOGLE_include_directive : require

#include "frame.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Particles { Particle particles[]; };
layout(std430, set = 0, binding = 2) readonly buffer Indices { uint indices[]; };

layout(location = 0) flat out vec4 v_color;
layout(location = 1) flat out vec3 v_disc;  // centre (pixels), radius (pixels)

void main() {
    Particle p = particles[indices[gl_InstanceIndex]];
    Sprite s = project(p.position_size);
    vec2 corner = vec2(float(gl_VertexIndex & 1), float(gl_VertexIndex >> 1)) * 2.0 - 1.0;
    vec2 pixel = s.center + corner * (s.radius + 1.0);
    gl_Position = vec4(pixel / frame.camera.yz * 2.0 - 1.0, 0.0, 1.0);
    v_color = p.color;
    v_disc = vec3(s.center, s.radius);
}
