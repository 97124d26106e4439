//! The component a [`Case`] becomes, as text (then `wat` encodes it).
//!
//! Each *layer* is a forwarder: for function `i` it imports a function
//! of signature `i`, lowers it into a core function, and exports the
//! lifted core function `g{i}` of a glue module that passes its core
//! arguments unchanged to the lowered import and returns what it returns.
//! Lifting and lowering use the same flattening, so arguments that go
//! through memory (more than 16 flat values) arrive as one pointer that
//! the glue hands on as it is, and a result that goes through memory is
//! written by the import into a return area the glue allocates and
//! returns. So every value crosses the boundary twice per layer: lifted
//! from the caller, lowered into the callee.
//!
//! Each layer has a `libc` core module of its own: the memory, a bump
//! `realloc` that counts its calls and hashes their arguments, `note`
//! (post-return functions report their arguments to it) and `stats`,
//! which reports those counters, the bump pointer and a hash of the
//! memory in use, exported as a component function.

use super::draw::{Case, Core, Corrupt, Layer, Sig, Ty};
use std::fmt::Write;

/// Type definitions: every compound type occurrence gets a definition
/// `$t{k}'` and a type import `t{k}` equal to it (`$t{k}`), since
/// records, variants, enums and flags in a component's imported and
/// exported function types must be named.
struct Types {
    decls: String,
    next: usize,
}

impl Types {
    /// The text referring to `t`, defining what it needs first.
    fn reference(&mut self, t: &Ty) -> String {
        let prim = match t {
            Ty::Bool => "bool",
            Ty::S8 => "s8",
            Ty::U8 => "u8",
            Ty::S16 => "s16",
            Ty::U16 => "u16",
            Ty::S32 => "s32",
            Ty::U32 => "u32",
            Ty::S64 => "s64",
            Ty::U64 => "u64",
            Ty::F32 => "f32",
            Ty::F64 => "f64",
            Ty::Char => "char",
            Ty::String => "string",
            _ => "",
        };
        if !prim.is_empty() {
            return prim.to_string();
        }
        let body = match t {
            Ty::List(e) => format!("(list {})", self.reference(e)),
            Ty::Record(fs) => {
                let mut s = String::from("(record");
                for (i, f) in fs.iter().enumerate() {
                    let r = self.reference(f);
                    write!(s, " (field \"{}\" {r})", super::draw::field(i)).unwrap();
                }
                s + ")"
            }
            Ty::Tuple(ts) => {
                let mut s = String::from("(tuple");
                for t in ts {
                    let r = self.reference(t);
                    write!(s, " {r}").unwrap();
                }
                s + ")"
            }
            Ty::Variant(cases) => {
                let mut s = String::from("(variant");
                for (i, c) in cases.iter().enumerate() {
                    let name = super::draw::case(i);
                    match c {
                        Some(p) => {
                            let r = self.reference(p);
                            write!(s, " (case \"{name}\" {r})").unwrap();
                        }
                        None => write!(s, " (case \"{name}\")").unwrap(),
                    }
                }
                s + ")"
            }
            Ty::Enum(n) => {
                let mut s = String::from("(enum");
                for i in 0..*n as usize {
                    write!(s, " \"{}\"", super::draw::enum_case(i)).unwrap();
                }
                s + ")"
            }
            Ty::Option(t) => format!("(option {})", self.reference(t)),
            Ty::Result(ok, err) => {
                let mut s = String::from("(result");
                if let Some(ok) = ok {
                    let r = self.reference(ok);
                    write!(s, " {r}").unwrap();
                }
                if let Some(err) = err {
                    let r = self.reference(err);
                    write!(s, " (error {r})").unwrap();
                }
                s + ")"
            }
            Ty::Flags(n) => {
                let mut s = String::from("(flags");
                for i in 0..*n as usize {
                    write!(s, " \"{}\"", super::draw::flag(i)).unwrap();
                }
                s + ")"
            }
            _ => unreachable!("primitives are handled above"),
        };
        let k = self.next;
        self.next += 1;
        writeln!(
            self.decls,
            "(type $t{k}' {body}) (import \"t{k}\" (type $t{k} (eq $t{k}')))"
        )
        .unwrap();
        format!("$t{k}")
    }
}

/// The definitions every component of the case repeats: the types, the
/// function types `$sig{i}` and the `stats` function type; and the
/// instantiation arguments that pass the types on.
struct Shared {
    decls: String,
    type_args: String,
}

fn shared(sigs: &[Sig]) -> Shared {
    let mut types = Types {
        decls: String::new(),
        next: 0,
    };
    let mut funcs = String::new();
    for (i, s) in sigs.iter().enumerate() {
        let mut f = format!("(type $sig{i} (func");
        for (j, p) in s.params.iter().enumerate() {
            let r = types.reference(p);
            write!(f, " (param \"p{j}\" {r})").unwrap();
        }
        if let Some(r) = &s.result {
            let r = types.reference(r);
            write!(f, " (result {r})").unwrap();
        }
        writeln!(funcs, "{f}))").unwrap();
    }
    let type_args = (0..types.next)
        .map(|k| format!("(with \"t{k}\" (type $t{k}))"))
        .collect::<Vec<_>>()
        .join(" ");
    Shared {
        decls: types.decls + &funcs,
        type_args,
    }
}

const LIBC: &str = r#"
  (core module $libc
    (memory (export "memory") 1)
    (global $bump (mut i32) (i32.const 64))
    (global $count (mut i32) (i32.const 0))
    (global $hash (mut i64) (i64.const 0))
    (func $mix (param i64)
      (global.set $hash (i64.mul (i64.xor (global.get $hash) (local.get 0))
                                 (i64.const 0x100000001b3))))
    (func (export "note") (param i64)
      (call $mix (local.get 0))
      (call $mix (i64.const 0x6e6f7465)))
    (func (export "realloc") (param $old i32) (param $osz i32) (param $al i32) (param $nsz i32)
          (result i32)
      (local $p i32) (local $end i32)
      (global.set $count (i32.add (global.get $count) (i32.const 1)))
      (call $mix (i64.extend_i32_u (local.get $old)))
      (call $mix (i64.extend_i32_u (local.get $osz)))
      (call $mix (i64.extend_i32_u (local.get $al)))
      (call $mix (i64.extend_i32_u (local.get $nsz)))
      FAULT
      (local.set $p (i32.and (i32.add (global.get $bump) (i32.sub (local.get $al) (i32.const 1)))
                             (i32.sub (i32.const 0) (local.get $al))))
      (local.set $end (i32.add (local.get $p) (local.get $nsz)))
      (if (i32.lt_u (local.get $end) (local.get $p)) (then unreachable))
      (if (i32.gt_u (local.get $end) (i32.const 0x1000000)) (then unreachable))
      (block $ok
        (loop $grow
          (br_if $ok (i32.le_u (local.get $end) (i32.shl (memory.size) (i32.const 16))))
          (br_if $grow (i32.ne (memory.grow (i32.const 1)) (i32.const -1)))
          unreachable))
      (global.set $bump (local.get $end))
      (if (local.get $old)
        (then (memory.copy (local.get $p) (local.get $old)
                (select (local.get $osz) (local.get $nsz)
                        (i32.lt_u (local.get $osz) (local.get $nsz))))))
      (local.get $p))
    (func (export "stats") (param $w i32) (result i64) (local $i i32) (local $h i64)
      (if (i32.eqz (local.get $w)) (then (return (i64.extend_i32_u (global.get $count)))))
      (if (i32.eq (local.get $w) (i32.const 1))
        (then (return (i64.extend_i32_u (global.get $bump)))))
      (if (i32.eq (local.get $w) (i32.const 2)) (then (return (global.get $hash))))
      (local.set $h (i64.const 0xcbf29ce484222325))
      (block $done
        (loop $l
          (br_if $done (i32.ge_u (local.get $i) (global.get $bump)))
          (local.set $h (i64.mul (i64.xor (local.get $h) (i64.load8_u (local.get $i)))
                                 (i64.const 0x100000001b3)))
          (local.set $i (i32.add (local.get $i) (i32.const 1)))
          (br $l)))
      (i64.xor (local.get $h) (i64.extend_i32_u (memory.size))))
  )
"#;

/// The core parameters of the lifted export (= the lowered import's,
/// less its return pointer) and its core results.
fn core_sig(s: &Sig) -> (Vec<Core>, Vec<Core>) {
    let params = if s.params_indirect() {
        vec![Core::I32]
    } else {
        s.flat_params()
    };
    let results = if s.results_indirect() {
        vec![Core::I32]
    } else {
        s.flat_results()
    };
    (params, results)
}

fn list(kind: &str, tys: &[Core]) -> String {
    if tys.is_empty() {
        return String::new();
    }
    let names: Vec<_> = tys.iter().map(|t| t.name()).collect();
    format!("({kind} {})", names.join(" "))
}

fn constant(t: Core, bits: u64) -> String {
    match t {
        Core::I32 => format!("(i32.const {})", bits as u32 as i32),
        Core::I64 => format!("(i64.const {})", bits as i64),
        Core::F32 => format!("(f32.reinterpret_i32 (i32.const {}))", bits as u32 as i32),
        Core::F64 => format!("(f64.reinterpret_i64 (i64.const {}))", bits as i64),
    }
}

/// The glue module of one layer.
fn glue(sigs: &[Sig], layer: &Layer) -> String {
    let mut m = String::from(
        "  (core module $glue\n    (import \"libc\" \"memory\" (memory 1))\n    \
         (import \"libc\" \"realloc\" (func $realloc (param i32 i32 i32 i32) (result i32)))\n    \
         (import \"libc\" \"note\" (func $note (param i64)))\n",
    );
    for (i, s) in sigs.iter().enumerate() {
        let (params, results) = core_sig(s);
        let mut lower_params = params.clone();
        if s.results_indirect() {
            lower_params.push(Core::I32);
        }
        let lower_results = if s.results_indirect() {
            Vec::new()
        } else {
            results.clone()
        };
        writeln!(
            m,
            "    (import \"host\" \"f{i}\" (func $f{i} {} {}))",
            list("param", &lower_params),
            list("result", &lower_results)
        )
        .unwrap();
    }
    for (i, (s, opts)) in sigs.iter().zip(&layer.funcs).enumerate() {
        let (params, results) = core_sig(s);
        writeln!(
            m,
            "    (func (export \"g{i}\") {} {} (local $rp i32)",
            list("param", &params),
            list("result", &results)
        )
        .unwrap();
        for (j, t) in params.iter().enumerate() {
            match opts.corrupt {
                Some(Corrupt::Param { index, bits }) if index == j => {
                    writeln!(m, "      {}", constant(*t, bits)).unwrap()
                }
                _ => writeln!(m, "      (local.get {j})").unwrap(),
            }
        }
        if s.results_indirect() {
            // A return area of 8 bytes per flat value (plus 8) holds the
            // result whatever its layout; 8-aligned suits every type.
            let size = 8 * s.flat_results().len() + 8;
            writeln!(
                m,
                "      (local.tee $rp (call $realloc (i32.const 0) (i32.const 0) (i32.const 8) (i32.const {size})))"
            )
            .unwrap();
        }
        writeln!(m, "      (call $f{i})").unwrap();
        if s.results_indirect() {
            if let Some(Corrupt::RetArea { offset, byte }) = opts.corrupt {
                writeln!(
                    m,
                    "      (i32.store8 offset={offset} (local.get $rp) (i32.const {byte}))"
                )
                .unwrap();
            }
            writeln!(m, "      (local.get $rp)").unwrap();
        } else if let (Some(Corrupt::Result { bits }), [t]) = (opts.corrupt, results.as_slice()) {
            writeln!(m, "      (drop) {}", constant(*t, bits)).unwrap();
        }
        writeln!(m, "    )").unwrap();
        // Post-return: reports each of the export's core results.
        writeln!(
            m,
            "    (func (export \"post{i}\") {}",
            list("param", &results)
        )
        .unwrap();
        for (j, t) in results.iter().enumerate() {
            let as_i64 = match t {
                Core::I32 => format!("(i64.extend_i32_u (local.get {j}))"),
                Core::I64 => format!("(local.get {j})"),
                Core::F32 => format!("(i64.extend_i32_u (i32.reinterpret_f32 (local.get {j})))"),
                Core::F64 => format!("(i64.reinterpret_f64 (local.get {j}))"),
            };
            writeln!(m, "      (call $note {as_i64})").unwrap();
        }
        writeln!(m, "      (call $note (i64.const {i})))").unwrap();
    }
    m.push_str("  )\n");
    m
}

/// One forwarder's items: imports `{import}{i}`, exports `{export}{i}`
/// and `stats_name`.
fn forwarder(
    case: &Case,
    layer: &Layer,
    shared: &Shared,
    import: &str,
    export: &str,
    stats_name: &str,
) -> String {
    let mut c = shared.decls.clone();
    for i in 0..case.sigs.len() {
        writeln!(
            c,
            "  (import \"{import}{i}\" (func $imp{i} (type $sig{i})))"
        )
        .unwrap();
    }
    let fault = match layer.realloc_fault {
        None => String::new(),
        Some((n, oob)) => {
            let ptr = if oob {
                "(i32.const -16)".to_string()
            } else {
                "(i32.or (global.get $bump) (i32.const 1))".to_string()
            };
            format!("(if (i32.eq (global.get $count) (i32.const {n})) (then (return {ptr})))")
        }
    };
    c.push_str(&LIBC.replace("FAULT", &fault));
    c.push_str("  (core instance $libc (instantiate $libc))\n");
    for (i, opts) in layer.funcs.iter().enumerate() {
        writeln!(
            c,
            "  (core func $low{i} (canon lower (func $imp{i}) (memory $libc \"memory\") \
             (realloc (func $libc \"realloc\")) string-encoding={}))",
            opts.lower.name()
        )
        .unwrap();
    }
    c.push_str(&glue(&case.sigs, layer));
    c.push_str("  (core instance $glue (instantiate $glue (with \"libc\" (instance $libc))\n");
    c.push_str("    (with \"host\" (instance");
    for i in 0..case.sigs.len() {
        write!(c, " (export \"f{i}\" (func $low{i}))").unwrap();
    }
    c.push_str("))))\n");
    for (i, opts) in layer.funcs.iter().enumerate() {
        let post = if opts.post_return {
            format!(" (post-return (func $glue \"post{i}\"))")
        } else {
            String::new()
        };
        writeln!(
            c,
            "  (func $ex{i} (type $sig{i}) (canon lift (core func $glue \"g{i}\") \
             (memory $libc \"memory\") (realloc (func $libc \"realloc\")) string-encoding={}{post}))",
            opts.lift.name()
        )
        .unwrap();
        writeln!(c, "  (export \"{export}{i}\" (func $ex{i}))").unwrap();
    }
    writeln!(
        c,
        "  (func $stats (param \"which\" u32) (result u64) (canon lift (core func $libc \"stats\")))\n  \
         (export \"{stats_name}\" (func $stats))"
    )
    .unwrap();
    c
}

/// The root component's text: imports `host-{i}`, exports `guest-{i}` and
/// `stats-{k}` for each layer `k`.
pub fn component(case: &Case) -> String {
    let shared = shared(&case.sigs);
    if let [layer] = case.layers.as_slice() {
        let body = forwarder(case, layer, &shared, "host-", "guest-", "stats-0");
        return format!("(component\n{body})\n");
    }
    let mut c = String::from("(component\n");
    c.push_str(&shared.decls);
    for i in 0..case.sigs.len() {
        writeln!(c, "  (import \"host-{i}\" (func $host{i} (type $sig{i})))").unwrap();
    }
    for (k, layer) in case.layers.iter().enumerate() {
        let body = forwarder(case, layer, &shared, "f-", "f-", "stats");
        writeln!(c, "(component $c{k}\n{body})").unwrap();
    }
    for k in 0..case.layers.len() {
        write!(c, "(instance $i{k} (instantiate $c{k} {}", shared.type_args).unwrap();
        for i in 0..case.sigs.len() {
            if k == 0 {
                write!(c, " (with \"f-{i}\" (func $host{i}))").unwrap();
            } else {
                write!(c, " (with \"f-{i}\" (func $i{} \"f-{i}\"))", k - 1).unwrap();
            }
        }
        c.push_str("))\n");
    }
    let last = case.layers.len() - 1;
    for i in 0..case.sigs.len() {
        writeln!(c, "(export \"guest-{i}\" (func $i{last} \"f-{i}\"))").unwrap();
    }
    for k in 0..case.layers.len() {
        writeln!(c, "(export \"stats-{k}\" (func $i{k} \"stats\"))").unwrap();
    }
    c.push_str(")\n");
    c
}
