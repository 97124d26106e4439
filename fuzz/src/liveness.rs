//! Rewriting a module so that none of its functions ever returns.
//!
//! Every function body `B` with results `R` becomes
//!
//! ```text
//! loop
//!   block (result R)
//!     B            ;; each `return` becomes a `br` to this block
//!   end
//!   drop × |R|
//!   br 0
//! end
//! unreachable
//! ```
//!
//! A branch to the function's own label in `B` now targets the block, which
//! has the function's results, so only `return` needs rewriting. The only
//! ways out are traps (including running out of stack through recursion)
//! and interruption, which is what `interrupt_liveness` checks. A block
//! type with several results needs a type index; those are appended to the
//! type section, after every existing type, so no index changes.

use wasm_encoder::reencode::{self, Reencode, RoundtripReencoder};
use wasmparser::{Operator, Parser, Payload, ValType};

struct Info {
    /// Result types of every type in the type section (`None`: not a
    /// function type).
    type_results: Vec<Option<Vec<ValType>>>,
    imported_funcs: u32,
    /// Type index of each defined function.
    defined: Vec<u32>,
    /// Exported functions: name and function index.
    func_exports: Vec<(String, u32)>,
}

fn scan(wasm: &[u8]) -> wasmparser::Result<Info> {
    let mut info = Info {
        type_results: Vec::new(),
        imported_funcs: 0,
        defined: Vec::new(),
        func_exports: Vec::new(),
    };
    for payload in Parser::new(0).parse_all(wasm) {
        match payload? {
            Payload::TypeSection(reader) => {
                for group in reader {
                    for sub in group?.into_types() {
                        info.type_results.push(match &sub.composite_type.inner {
                            wasmparser::CompositeInnerType::Func(f) => Some(f.results().to_vec()),
                            _ => None,
                        });
                    }
                }
            }
            Payload::ImportSection(reader) => {
                for import in reader.into_imports() {
                    if matches!(import?.ty, wasmparser::TypeRef::Func(_)) {
                        info.imported_funcs += 1;
                    }
                }
            }
            Payload::FunctionSection(reader) => {
                for ty in reader {
                    info.defined.push(ty?);
                }
            }
            Payload::ExportSection(reader) => {
                for export in reader {
                    let export = export?;
                    if export.kind == wasmparser::ExternalKind::Func {
                        info.func_exports
                            .push((export.name.to_string(), export.index));
                    }
                }
            }
            _ => {}
        }
    }
    Ok(info)
}

struct NeverReturn {
    info: Info,
    /// Result lists that need a new type, and the index each one gets.
    extra_types: Vec<Vec<ValType>>,
    next_func: usize,
}

impl NeverReturn {
    fn results_of_next_func(&mut self) -> Vec<ValType> {
        let ty = self.info.defined.get(self.next_func).copied();
        self.next_func += 1;
        ty.and_then(|t| self.info.type_results.get(t as usize).cloned().flatten())
            .unwrap_or_default()
    }

    fn block_type(&mut self, results: &[ValType]) -> wasm_encoder::BlockType {
        match results {
            [] => wasm_encoder::BlockType::Empty,
            [one] => wasm_encoder::BlockType::Result(RoundtripReencoder.val_type(*one).unwrap()),
            many => {
                let pos = match self.extra_types.iter().position(|r| r == many) {
                    Some(pos) => pos,
                    None => {
                        self.extra_types.push(many.to_vec());
                        self.extra_types.len() - 1
                    }
                };
                wasm_encoder::BlockType::FunctionType((self.info.type_results.len() + pos) as u32)
            }
        }
    }
}

impl Reencode for NeverReturn {
    type Error = std::convert::Infallible;

    fn parse_type_section(
        &mut self,
        types: &mut wasm_encoder::TypeSection,
        section: wasmparser::TypeSectionReader<'_>,
    ) -> Result<(), reencode::Error<Self::Error>> {
        reencode::utils::parse_type_section(self, types, section)?;
        for results in &self.extra_types {
            let results: Vec<_> = results
                .iter()
                .map(|t| RoundtripReencoder.val_type(*t).unwrap())
                .collect();
            types.ty().function([], results);
        }
        Ok(())
    }

    fn parse_function_body(
        &mut self,
        code: &mut wasm_encoder::CodeSection,
        func: wasmparser::FunctionBody<'_>,
    ) -> Result<(), reencode::Error<Self::Error>> {
        let results = self.results_of_next_func();
        let block_type = self.block_type(&results);
        let mut f = self.new_function_with_parsed_locals(&func)?;
        f.instruction(&wasm_encoder::Instruction::Loop(
            wasm_encoder::BlockType::Empty,
        ));
        f.instruction(&wasm_encoder::Instruction::Block(block_type));
        let mut reader = func.get_operators_reader()?;
        // Labels opened inside the body so far: a `return` at depth `d` is a
        // `br d` to the wrapping block.
        let mut depth = 0u32;
        while !reader.eof() {
            let op = reader.read()?;
            match op {
                Operator::Block { .. } | Operator::Loop { .. } | Operator::If { .. } => depth += 1,
                Operator::End if depth == 0 => break,
                Operator::End => depth -= 1,
                Operator::Return => {
                    f.instruction(&wasm_encoder::Instruction::Br(depth));
                    continue;
                }
                _ => {}
            }
            f.instruction(&self.instruction(op)?);
        }
        f.instruction(&wasm_encoder::Instruction::End);
        for _ in &results {
            f.instruction(&wasm_encoder::Instruction::Drop);
        }
        f.instruction(&wasm_encoder::Instruction::Br(0));
        f.instruction(&wasm_encoder::Instruction::End);
        f.instruction(&wasm_encoder::Instruction::Unreachable);
        f.instruction(&wasm_encoder::Instruction::End);
        code.function(&f);
        Ok(())
    }
}

/// Names of the exported functions that `wasm` defines itself (after
/// [`never_return`], exactly the exports that can never return).
pub fn defined_func_exports(wasm: &[u8]) -> Vec<String> {
    let Ok(info) = scan(wasm) else {
        return Vec::new();
    };
    info.func_exports
        .into_iter()
        .filter(|(_, index)| *index >= info.imported_funcs)
        .map(|(name, _)| name)
        .collect()
}

/// `wasm` with every function body wrapped as described in the module
/// docs; `None` if it cannot be parsed.
pub fn never_return(wasm: &[u8]) -> Option<Vec<u8>> {
    let info = scan(wasm).ok()?;
    let mut rewriter = NeverReturn {
        info,
        extra_types: Vec::new(),
        next_func: 0,
    };
    // The extra types must be known before the type section is written,
    // which comes before the code: a first pass over the bodies collects
    // them.
    let mut first = wasm_encoder::Module::new();
    rewriter
        .parse_core_module(&mut first, Parser::new(0), wasm)
        .ok()?;
    rewriter.next_func = 0;
    let mut module = wasm_encoder::Module::new();
    rewriter
        .parse_core_module(&mut module, Parser::new(0), wasm)
        .ok()?;
    Some(module.finish())
}

#[cfg(test)]
mod tests {
    #[test]
    fn wraps_multi_value_and_return() {
        let wasm = wat_module();
        let out = super::never_return(&wasm).unwrap();
        wasmparser::Validator::new().validate_all(&out).unwrap();
    }

    fn wat_module() -> Vec<u8> {
        // (module
        //   (func (result i32 i64) i32.const 1 i64.const 2 return)
        //   (func (param i32) (result i32) block local.get 0 br_if 1 end i32.const 3))
        let mut m = wasm_encoder::Module::new();
        let mut types = wasm_encoder::TypeSection::new();
        types
            .ty()
            .function([], [wasm_encoder::ValType::I32, wasm_encoder::ValType::I64]);
        types
            .ty()
            .function([wasm_encoder::ValType::I32], [wasm_encoder::ValType::I32]);
        m.section(&types);
        let mut funcs = wasm_encoder::FunctionSection::new();
        funcs.function(0);
        funcs.function(1);
        m.section(&funcs);
        let mut code = wasm_encoder::CodeSection::new();
        let mut f = wasm_encoder::Function::new([]);
        f.instructions().i32_const(1).i64_const(2).return_().end();
        code.function(&f);
        let mut f = wasm_encoder::Function::new([]);
        f.instructions()
            .block(wasm_encoder::BlockType::Empty)
            .local_get(0)
            .local_get(0)
            .br_if(2)
            .drop()
            .end()
            .i32_const(3)
            .end();
        code.function(&f);
        m.section(&code);
        m.finish()
    }
}
