;; Asks the host to copy the view to a buffer past the end of its one page
;; of memory (abi).
(module
  (import "wagent" "view" (func $view (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (drop (call $view (i32.const 65000) (i32.const 4096)))
    (i32.const 0)))
