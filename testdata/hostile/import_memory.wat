;; Imports its memory (refused at load).
(module
  (import "wasi_snapshot_preview1" "memory" (memory 1))
  (export "memory" (memory 0))
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
