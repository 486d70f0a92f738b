;; wat2wasm: --no-check
;; The type-index variant of the escape: call_indirect through type 7, which
;; the module does not declare (it has 2 types), hoping a rewriter adds
;; types of its own there. Refused at load.
(module
  (type $unit (func))
  (memory (export "memory") 1)
  (table 1 1 funcref)
  (func (export "wagent_abi_v1"))
  (func (export "wagent_on_tool") (param i32) (result i32)
    (call_indirect (type 7) (i32.const 0))
    (i32.const 0)))
