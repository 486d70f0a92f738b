// Package wasmops holds the tests of the drop-in operations in this
// folder: each example passes the conformance kit (wasmhost/abitest), and
// the policy op in AssemblyScript (policy-as) and in C (policy-c) answers
// every case exactly as the Go one (guests/examples/policy) does. Its
// benchmarks compare the three against the same policy as a native Go op.
package wasmops
