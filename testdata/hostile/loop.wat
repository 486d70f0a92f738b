;; An infinite loop in a handler: the call's deadline must stop it (timeout).
(module
  (memory (export "memory") 1)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (loop $forever (br $forever))
    (i32.const 0)))
