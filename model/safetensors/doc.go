// Package safetensors reads checkpoints in the safetensors format of
// Hugging Face, single files and sharded directories, and converts their
// float tensors to float32.
//
// A file is an 8-byte little-endian header length n, n bytes of JSON header,
// then the data section. The header maps tensor names to
// {"dtype", "shape", "data_offsets": [begin, end]} with offsets relative to
// the data section, plus an optional "__metadata__" map of strings. A sharded
// checkpoint adds model.safetensors.index.json, whose "weight_map" names the
// file holding each tensor.
//
// Files come from users, so everything is validated before any tensor is
// read: the header length against the file size and a 100 MB cap (the limit
// of the reference implementation), the JSON (duplicate names are rejected),
// every dtype, shape and offset pair (in range, end - begin equal to the
// element size times the product of the shape, computed without overflow),
// and that no two tensors overlap. Errors name the file and the tensor and
// never panic. Tensors of any dtype of the format (I64, U8, F8_E4M3, ...)
// can be listed and read as bytes; conversion to float32 supports F32, F16
// and BF16 and names the tensor and dtype otherwise.
//
// Open maps a file into memory with mmap where the platform has it and falls
// back to reading it whole. Tensor data returned by a File is a view of that
// memory and is valid until Close. (A mapped file that another process
// truncates makes later reads fault, as with any mmap-based reader.)
package safetensors
