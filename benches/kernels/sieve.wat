;; Sieve of Eratosthenes over the first million bytes of linear memory,
;; repeated $rounds times: byte loads and stores in nested loops. Returns the
;; number of primes below one million times the number of rounds.
(module
  (memory 16)
  (func (export "run") (param $rounds i32) (result i64)
    (local $total i64)
    (loop $again
      (local.set $total (i64.add (local.get $total) (call $sieve (i32.const 1000000))))
      (local.set $rounds (i32.sub (local.get $rounds) (i32.const 1)))
      (br_if $again (i32.gt_s (local.get $rounds) (i32.const 0))))
    (local.get $total))
  (func $sieve (param $n i32) (result i64)
    (local $i i32) (local $j i32) (local $count i32)
    (memory.fill (i32.const 0) (i32.const 1) (local.get $n))
    (local.set $i (i32.const 2))
    (block $done
      (loop $outer
        (br_if $done (i32.gt_u (i32.mul (local.get $i) (local.get $i)) (local.get $n)))
        (if (i32.load8_u (local.get $i))
          (then
            (local.set $j (i32.mul (local.get $i) (local.get $i)))
            (block $inner_done
              (loop $inner
                (br_if $inner_done (i32.ge_u (local.get $j) (local.get $n)))
                (i32.store8 (local.get $j) (i32.const 0))
                (local.set $j (i32.add (local.get $j) (local.get $i)))
                (br $inner)))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $outer)))
    (local.set $i (i32.const 2))
    (block $counted
      (loop $count_loop
        (br_if $counted (i32.ge_u (local.get $i) (local.get $n)))
        (local.set $count (i32.add (local.get $count) (i32.load8_u (local.get $i))))
        (local.set $i (i32.add (local.get $i) (i32.const 1)))
        (br $count_loop)))
    (i64.extend_i32_u (local.get $count))))
