#version 450
// depth: for every particle in front of the camera whose sprite reaches the image, appends its
// view-space depth (the sort key) and its index (the value) at a slot of the count. The count is the
// sort's GPU-side element count and the indirect draw's instance count; the host zeroes it before
// this pass. Slots are taken per workgroup: one atomic add on the count per workgroup, after
// atomic adds on a shared counter, so that the count is not one global atomic per particle.
#extension GL_GOOGLE_include_directive : require

layout(local_size_x = 256) in;

#include "frame.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Particles { Particle particles[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Keys { float keys[]; };
layout(std430, set = 0, binding = 2) writeonly buffer Indices { uint indices[]; };
layout(std430, set = 0, binding = 3) buffer Count { uint count; };

shared uint group_count;
shared uint group_base;

void main() {
    uint i = gl_GlobalInvocationID.x;
    if (gl_LocalInvocationIndex == 0) {
        group_count = 0;
    }
    barrier();
    Sprite s;
    bool keep = false;
    uint local_slot = 0;
    if (i < frame.counts.x) {
        s = project(particles[i].position_size);
        keep = visible(s);
        if (keep) {
            local_slot = atomicAdd(group_count, 1u);
        }
    }
    barrier();
    if (gl_LocalInvocationIndex == 0) {
        group_base = atomicAdd(count, group_count);
    }
    barrier();
    if (keep) {
        uint slot = group_base + local_slot;
        keys[slot] = s.depth;
        indices[slot] = i;
    }
}
