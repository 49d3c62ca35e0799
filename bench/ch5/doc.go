// Package ch5 is seed 004's chapter-5 experiment in lanes' testbed: a
// video-like stream with real per-frame CPU work between two network
// namespaces over the emulated link, disturbed by CPU contention on both
// ends and a greedy background flow, run in four arms — no management,
// application adaptation only, lanesd's resource management only, and
// lanesd's integrated control (CPU, network and the application's quality
// together) — and reported as frames per second and jitter per second.
//
// The video application (Sender, Receiver) encodes each frame with a
// block transform, quantisation and DEFLATE (Encode), sends it in
// 1200-byte UDP datagrams and decodes it at the far end (Decode), so that
// its CPU cost scales with its quality setting 1..100; it reports its
// frame rate to lanesd (POST /v1/report) and obeys quality directives
// (GET /v1/directives). `lanes bench ch5` runs the experiment (Run);
// `lanes bench ch5video` is one end of the application.
package ch5
