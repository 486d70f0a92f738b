;; Calls a host function from _initialize, outside any hook call (abi,
;; when the instance starts).
(module
  (import "wagent" "view" (func $view (param i32 i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "_initialize")
    (drop (call $view (i32.const 0) (i32.const 0))))
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
