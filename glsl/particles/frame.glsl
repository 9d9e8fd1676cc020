// The particle example's shared declarations: the particle layout, the per-frame push constants,
// and where a particle lands on the image. depth.comp culls and keys with `project`, sprite.vert
// places its quad with the same function, and examples/particles/scene.rs evaluates the same
// arithmetic on the CPU for the reference image.

// 32 bytes, std430: xyz = world position, w = radius (world units); rgb = colour, a = opacity.
struct Particle {
    vec4 position_size;
    vec4 color;
};

layout(push_constant) uniform Frame {
    mat4 view;     // world -> view; the camera looks down -z, +y is up
    vec4 camera;   // x: focal length in pixels, y: width, z: height, w: near distance (culled below)
    uvec4 counts;  // x: particles; yzw unused
} frame;

// A particle on the image: its disc's centre and radius in framebuffer pixels (y down), and its
// view-space depth (distance in front of the camera, the sort key).
struct Sprite {
    vec2 center;
    float radius;
    float depth;
};

Sprite project(vec4 position_size) {
    vec4 v = frame.view * vec4(position_size.xyz, 1.0);
    Sprite s;
    s.depth = -v.z;
    float scale = frame.camera.x / s.depth;
    s.center = vec2(0.5 * frame.camera.y + v.x * scale, 0.5 * frame.camera.z - v.y * scale);
    s.radius = max(position_size.w * scale, 1.0);
    return s;
}

// In front of the near distance, and the quad (the disc plus one pixel) reaches the image.
bool visible(Sprite s) {
    vec2 half_size = 0.5 * frame.camera.yz;
    return s.depth > frame.camera.w && all(lessThan(abs(s.center - half_size), half_size + vec2(s.radius + 1.0)));
}
