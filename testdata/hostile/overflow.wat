;; Passes a pointer and length whose sum wraps past 2^32 (abi).
(module
  (import "wagent" "view" (func $view (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $view (i32.const 0xfffffff0) (i32.const 0x20)))
    (i32.const 0)))
