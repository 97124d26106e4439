;; Memory streaming: 4 MiB of i64 words written once, then summed and
;; copied (load, add, store) $n times. Bandwidth-bound loads and stores.
(module
  (memory 130)
  (func (export "run") (param $n i32) (result i64)
    (local $i i32) (local $round i32) (local $sum i64)
    (local.set $i (i32.const 0))
    (loop $init
      (i64.store (local.get $i) (i64.extend_i32_u (local.get $i)))
      (local.set $i (i32.add (local.get $i) (i32.const 8)))
      (br_if $init (i32.lt_u (local.get $i) (i32.const 0x400000))))
    (loop $rounds
      (local.set $i (i32.const 0))
      (loop $words
        (local.set $sum (i64.add (local.get $sum) (i64.load (local.get $i))))
        (i64.store offset=0x400000 (local.get $i)
          (i64.add (i64.load (local.get $i)) (local.get $sum)))
        (local.set $i (i32.add (local.get $i) (i32.const 8)))
        (br_if $words (i32.lt_u (local.get $i) (i32.const 0x400000))))
      (local.set $round (i32.add (local.get $round) (i32.const 1)))
      (br_if $rounds (i32.lt_u (local.get $round) (local.get $n))))
    (local.get $sum)))
