;; A call_indirect-heavy loop: each iteration calls one of eight small
;; functions through a table, chosen by a xorshift sequence, so every call
;; pays the bounds, null and signature checks.
(module
  (type $op (func (param i64) (result i64)))
  (table 8 funcref)
  (elem (i32.const 0) $f0 $f1 $f2 $f3 $f4 $f5 $f6 $f7)
  (func $f0 (type $op) (i64.add (local.get 0) (i64.const 1)))
  (func $f1 (type $op) (i64.mul (local.get 0) (i64.const 3)))
  (func $f2 (type $op) (i64.xor (local.get 0) (i64.const 0x5555)))
  (func $f3 (type $op) (i64.sub (local.get 0) (i64.const 7)))
  (func $f4 (type $op) (i64.rotl (local.get 0) (i64.const 5)))
  (func $f5 (type $op) (i64.shr_u (local.get 0) (i64.const 1)))
  (func $f6 (type $op) (i64.add (local.get 0) (local.get 0)))
  (func $f7 (type $op) (i64.or (local.get 0) (i64.const 0x100)))
  (func (export "run") (param $n i32) (result i64)
    (local $x i64) (local $acc i64)
    (local.set $x (i64.const 88172645463325252))
    (loop $l
      (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 13))))
      (local.set $x (i64.xor (local.get $x) (i64.shr_u (local.get $x) (i64.const 7))))
      (local.set $x (i64.xor (local.get $x) (i64.shl (local.get $x) (i64.const 17))))
      (local.set $acc
        (call_indirect (type $op) (local.get $acc) (i32.wrap_i64 (i64.and (local.get $x) (i64.const 7)))))
      (local.set $n (i32.sub (local.get $n) (i32.const 1)))
      (br_if $l (i32.ne (local.get $n) (i32.const 0))))
    (local.get $acc)))
