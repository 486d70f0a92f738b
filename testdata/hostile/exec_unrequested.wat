;; Imports exec without requesting the exec capability in its manifest
;; (refused at load).
(module
  (import "wagent" "exec" (func $exec (param i32 i32 i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $exec (i32.const 0) (i32.const 0) (i32.const 0) (i32.const 0)))
    (i32.const 0)))
