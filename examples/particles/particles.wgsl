// The wgpu renderer's shaders (examples/particles/wgpu_render.rs): `depth`, the depth pass, and
// `sprite_vertex` / `sprite_fragment`, the draw. A port of glsl/particles/{depth.comp, frame.glsl,
// sprite.vert, sprite.frag} operation for operation, so that scene.rs's reference holds for both
// renderers; the frame's constants are a uniform buffer here, laid out as the GLSL's push
// constants (scene::FrameConstants, 96 bytes).

// 32 bytes: xyz = world position, w = radius (world units); rgb = colour, a = opacity.
struct Particle {
    position_size: vec4<f32>,
    color: vec4<f32>,
}

struct Frame {
    view: mat4x4<f32>,   // world -> view; the camera looks down -z, +y is up
    camera: vec4<f32>,   // x: focal length in pixels, y: width, z: height, w: near distance
    counts: vec4<u32>,   // x: particles; yzw unused
}

// A particle on the image: its disc's centre and radius in framebuffer pixels (y down), and its
// view-space depth (the sort key).
struct Sprite {
    center: vec2<f32>,
    radius: f32,
    depth: f32,
}

@group(0) @binding(0) var<storage, read> particles: array<Particle>;
@group(0) @binding(1) var<storage, read_write> keys: array<f32>;
@group(0) @binding(2) var<storage, read_write> indices: array<u32>;
@group(0) @binding(3) var<storage, read_write> count: atomic<u32>;
@group(0) @binding(4) var<uniform> frame: Frame;
// The draw reads the sorted indices only (a read-only binding of the same region).
@group(0) @binding(5) var<storage, read> sorted: array<u32>;

fn project(position_size: vec4<f32>) -> Sprite {
    let v = frame.view * vec4<f32>(position_size.xyz, 1.0);
    var s: Sprite;
    s.depth = -v.z;
    let scale = frame.camera.x / s.depth;
    s.center = vec2<f32>(0.5 * frame.camera.y + v.x * scale, 0.5 * frame.camera.z - v.y * scale);
    s.radius = max(position_size.w * scale, 1.0);
    return s;
}

// In front of the near distance, and the quad (the disc plus one pixel) reaches the image.
fn visible(s: Sprite) -> bool {
    let half_size = 0.5 * frame.camera.yz;
    return s.depth > frame.camera.w && all(abs(s.center - half_size) < half_size + vec2<f32>(s.radius + 1.0));
}

// Invocations per workgroup: set by the host (DEPTH_GROUP in render.rs).
override group_size: u32 = 256u;

var<workgroup> group_count: atomic<u32>;
var<workgroup> group_base: u32;

// Appends every visible particle's depth and index at a slot of the count: one atomic add on the
// count per workgroup, after atomic adds on a workgroup counter. The count starts at zero (the
// frame clears it before this pass).
@compute @workgroup_size(group_size)
fn depth(@builtin(global_invocation_id) id: vec3<u32>, @builtin(local_invocation_index) local: u32) {
    let i = id.x;
    if local == 0u {
        atomicStore(&group_count, 0u);
    }
    workgroupBarrier();
    var s: Sprite;
    var keep = false;
    var local_slot = 0u;
    if i < frame.counts.x {
        s = project(particles[i].position_size);
        keep = visible(s);
        if keep {
            local_slot = atomicAdd(&group_count, 1u);
        }
    }
    workgroupBarrier();
    if local == 0u {
        group_base = atomicAdd(&count, atomicLoad(&group_count));
    }
    workgroupBarrier();
    if keep {
        let slot = group_base + local_slot;
        keys[slot] = s.depth;
        indices[slot] = i;
    }
}

struct Varyings {
    @builtin(position) position: vec4<f32>,
    @location(0) @interpolate(flat) color: vec4<f32>,
    @location(1) @interpolate(flat) disc: vec3<f32>, // centre (pixels), radius (pixels)
}

// Instance i draws the particle at sorted slot i as a camera-facing quad, a triangle strip of 4
// vertices reaching one pixel past the disc.
@vertex
fn sprite_vertex(@builtin(vertex_index) vertex: u32, @builtin(instance_index) instance: u32) -> Varyings {
    let p = particles[sorted[instance]];
    let s = project(p.position_size);
    let corner = vec2<f32>(f32(vertex & 1u), f32(vertex >> 1u)) * 2.0 - 1.0;
    let pixel = s.center + corner * (s.radius + 1.0);
    // wgpu's clip space has +y up (Vulkan's has it down): the pixel's y is flipped here, so that
    // the framebuffer's rows, and @builtin(position) below, run top down as in the GLSL.
    let ndc = pixel / frame.camera.yz * 2.0 - 1.0;
    var out: Varyings;
    out.position = vec4<f32>(ndc.x, -ndc.y, 0.0, 1.0);
    out.color = p.color;
    out.disc = vec3<f32>(s.center, s.radius);
    return out;
}

// A soft disc, its opacity a function of the pixel centre alone; premultiplied output, blended
// ONE, ONE_MINUS_SRC_ALPHA (back-to-front "over").
@fragment
fn sprite_fragment(in: Varyings) -> @location(0) vec4<f32> {
    let d = in.position.xy - in.disc.xy;
    let q = max(1.0 - dot(d, d) / (in.disc.z * in.disc.z), 0.0);
    let alpha = in.color.a * q * q;
    return vec4<f32>(in.color.rgb * alpha, alpha);
}
