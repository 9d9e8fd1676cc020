#version 450
// dispatch_args: recorded beside the first pass (the tile sort, dispatched directly) of a sort
// through a binding with a GPU-side count. It reads the count and writes, for each later dispatch
// the passes were recorded with, the arguments of vkCmdDispatchIndirect: the workgroups that count needs (dispatch_groups, generated into
// rules.glsl from src/abi/table.rs, which the host's CPU model runs too) and one row per array.
// Invocation i takes the i-th of the up to ARGS_PER_DISPATCH rules in the push constants.
#extension GL_GOOGLE_include_directive : require

#include "rules.glsl"

layout(local_size_x = 4) in;

layout(push_constant) uniform ArgsPush {
    uint n;       // elements per array the passes were recorded for
    uint batches; // arrays side by side: each dispatch's rows
    uint rules;   // rules in this push, at most ARGS_PER_DISPATCH
    uint first;   // index of the first one's arguments
    uint rule[ARGS_PER_DISPATCH * DISPATCH_RULE_WORDS];
} args_pc;

layout(std430, set = 0, binding = 2) readonly buffer Count { uint count_word; };
layout(std430, set = 0, binding = 3) writeonly buffer Args { uvec4 args[]; };

void main() {
    uint i = gl_LocalInvocationID.x;
    if (i >= args_pc.rules) {
        return;
    }
    uint r = i * DISPATCH_RULE_WORDS;
    uint x = dispatch_groups(count_word, args_pc.n, args_pc.rule[r], args_pc.rule[r + 1u], args_pc.rule[r + 2u],
                             args_pc.rule[r + 3u], args_pc.rule[r + 4u], args_pc.rule[r + 5u], args_pc.rule[r + 6u],
                             args_pc.rule[r + 7u]);
    args[args_pc.first + i] = uvec4(x, args_pc.batches, 1u, 0u);
}
