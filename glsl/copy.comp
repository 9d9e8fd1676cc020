#version 450
// copy: the bandwidth ceiling of the pass model. Copies n 16-byte words from binding 0 to binding
// 1, one per invocation, with vec4-wide loads and stores: what a pass that reads and writes every
// element once could move at best on this device.
// Push constants used: n (16-byte words, 0..2^30), group_offset.
#extension GL_GOOGLE_include_directive : require

#include "interface.glsl"

layout(std430, set = 0, binding = 0) readonly buffer Source { uvec4 source[]; };
layout(std430, set = 0, binding = 1) writeonly buffer Destination { uvec4 destination[]; };

void main() {
    uint i = (gl_WorkGroupID.x + pc.group_offset) * WG_SIZE + gl_LocalInvocationID.x;
    if (i < pc.n) {
        destination[i] = source[i];
    }
}
