// Package eval measures the accuracy of KV-cache and weight formats on a
// real model: perplexity, KL divergence and top-1 agreement against a
// baseline over windows of a text (PPL, PPLVariants), long-range retrieval
// probes (ReuseProbes), and the calibration statistics GPTQ quantizes with
// (Calibrate, which also measures DEC's approximate top-k recall).
//
// It drives model.Model.Forward over caches made by package kvcache; it
// does not generate text (package engine does) or know the formats' bytes
// (package kv does).
package eval
