#version 450
// empty: a dispatch that does nothing, to measure the fixed cost of a pass and of a barrier
// (chains of it with and without barriers between dispatches). No push constants are read.
layout(local_size_x = 32) in;

void main() {
}
