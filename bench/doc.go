// Package bench runs bitdecode's benchmarks: decode attention per KV format
// (CPU here, GPU through the CUDA backend), the machine's read bandwidth that
// achieved rates are judged against, and the tables, JSON and plots that
// `bitdecode bench` prints and writes. Benchmarks are programs, not timed
// unit tests; bench/anchors holds the Python scripts that measure the peers
// (PyTorch SDPA) on the GPU machine.
package bench
