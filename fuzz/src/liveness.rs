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
//!
//! Every defined function is exported too (those without an export get
//! `never_return_func{index}`), so that the target can call each of them:
//! a spec module without function exports would otherwise run no code.

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
    /// Names of all exports, of every kind.
    export_names: Vec<String>,
    has_export_section: bool,
}

impl Info {
    /// Adds to `exports` an export for each defined function that has
    /// none, under a name no other export uses.
    fn add_missing_func_exports(&self, exports: &mut wasm_encoder::ExportSection) {
        let defined = self.imported_funcs..self.imported_funcs + self.defined.len() as u32;
        for index in defined.filter(|index| !self.func_exports.iter().any(|(_, i)| i == index)) {
            let name = format!("never_return_func{index}");
            if !self.export_names.contains(&name) {
                exports.export(&name, wasm_encoder::ExportKind::Func, index);
            }
        }
    }
}

fn scan(wasm: &[u8]) -> wasmparser::Result<Info> {
    let mut info = Info {
        type_results: Vec::new(),
        imported_funcs: 0,
        defined: Vec::new(),
        func_exports: Vec::new(),
        export_names: Vec::new(),
        has_export_section: false,
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
                info.has_export_section = true;
                for export in reader {
                    let export = export?;
                    info.export_names.push(export.name.to_string());
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
    /// Whether the export section (for a module that had none) is written.
    exports_added: bool,
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

    fn parse_export_section(
        &mut self,
        exports: &mut wasm_encoder::ExportSection,
        section: wasmparser::ExportSectionReader<'_>,
    ) -> Result<(), reencode::Error<Self::Error>> {
        reencode::utils::parse_export_section(self, exports, section)?;
        self.info.add_missing_func_exports(exports);
        Ok(())
    }

    fn intersperse_section_hook(
        &mut self,
        module: &mut wasm_encoder::Module,
        _after: Option<wasm_encoder::SectionId>,
        before: Option<wasm_encoder::SectionId>,
    ) -> Result<(), reencode::Error<Self::Error>> {
        use wasm_encoder::SectionId;
        // An export section for a module without one goes where the binary
        // format wants it: before the first of these sections.
        let exports_due = matches!(
            before,
            None | Some(
                SectionId::Start
                    | SectionId::Element
                    | SectionId::DataCount
                    | SectionId::Code
                    | SectionId::Data
            )
        );
        if exports_due && !self.info.has_export_section && !self.exports_added {
            self.exports_added = true;
            let mut exports = wasm_encoder::ExportSection::new();
            self.info.add_missing_func_exports(&mut exports);
            if !exports.is_empty() {
                module.section(&exports);
            }
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
        exports_added: false,
    };
    // The extra types must be known before the type section is written,
    // which comes before the code: a first pass over the bodies collects
    // them.
    let mut first = wasm_encoder::Module::new();
    rewriter
        .parse_core_module(&mut first, Parser::new(0), wasm)
        .ok()?;
    rewriter.next_func = 0;
    rewriter.exports_added = false;
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
        // The module exported nothing; now both functions are exported.
        assert_eq!(
            super::defined_func_exports(&out),
            ["never_return_func0", "never_return_func1"]
        );
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
