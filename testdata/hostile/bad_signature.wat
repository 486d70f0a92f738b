;; Imports wagent.view with the wrong signature (refused at load).
(module
  (import "wagent" "view" (func $view (param i32) (result i32)))
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (call $view (i32.const 0))))
