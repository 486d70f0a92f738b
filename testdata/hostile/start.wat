;; Has a start function (a loop), which would run at instantiation, before
;; any deadline is armed (refused at load).
(module
  (memory (export "memory") 1)
  (func $spin (loop $l (br $l)))
  (start $spin)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
