;; Imports a WASI function outside the allowed subset (refused at load).
(module
  (import "wasi_snapshot_preview1" "sock_accept" (func $accept (param i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $accept (i32.const 3) (i32.const 0) (i32.const 0)))
    (i32.const 0)))
