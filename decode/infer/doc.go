// Package infer guesses a JSON mapping from sampled record values: the
// columns a decode.MappingSpec would need to hold them, with their types,
// paths and nullability. It is what `kafka2pg infer` prints a sink from.
//
// Feed every sampled value to [Inference.Observe], then read
// [Inference.Columns]. The result is a guess from the samples, meant to be
// read and edited: a type is only as wide as the widest value seen (with
// some room for numbers), and a column is NOT NULL only when every sample
// had a value there.
//
// A string column's type is decided by the mapping's own converters
// (decode.CheckString): it becomes timestamptz or uuid only when the
// mapping takes every sampled string of it into such a column, so the
// inference and the mapping cannot disagree on what a timestamp or a
// UUID looks like.
//
// The package owns no goroutines and does no I/O. It imports decode and
// the standard library.
package infer
