;; Loops forever in _initialize: starting the instance runs out of its
;; deadline (timeout, when the instance starts).
(module
  (memory (export "memory") 1)
  (func (export "_initialize") (loop $l (br $l)))
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (i32.const 0)))
