//! Parsing a `.wast` file and walking its directives, for a runner that
//! executes one directive at a time.

use super::failures::{Failure, FileResult, panic_message};
use std::panic::{AssertUnwindSafe, catch_unwind};
use wast::lexer::Lexer;
use wast::parser::{self, ParseBuffer};
use wast::{QuoteWat, Wast, WastDirective, Wat};

/// Parses `text` and hands every directive to `run`, in order, collecting
/// the failures. Directives go on after a failure so that one report shows
/// all of them; only a panic stops the file, since the engine's state may
/// then be inconsistent.
pub fn run_directives(
    name: &str,
    text: &str,
    mut run: impl FnMut(WastDirective<'_>) -> Result<(), String>,
) -> FileResult {
    let mut lexer = Lexer::new(text);
    // The `names.wast` files (`annotated-names.wast` among them) use
    // confusable unicode in identifiers on purpose. Upstream's runner
    // allows it in these files only, and the same rule keeps our runners'
    // parse errors like upstream's.
    lexer.allow_confusing_unicode(name.ends_with("names.wast"));
    let with_location = |mut e: wast::Error| {
        e.set_path(name.as_ref());
        e.set_text(text);
        e.to_string()
    };
    let buf = match ParseBuffer::new_with_lexer(lexer) {
        Ok(buf) => buf,
        Err(e) => return FileResult::Broken(with_location(e)),
    };
    let wast = match parser::parse::<Wast<'_>>(&buf) {
        Ok(wast) => wast,
        Err(e) => return FileResult::Broken(with_location(e)),
    };

    let mut failures = Vec::new();
    let total = wast.directives.len();
    for (i, directive) in wast.directives.into_iter().enumerate() {
        let (line, col) = directive.span().linecol_in(text);
        let kind = directive_name(&directive);
        let mut fail = |reason: String| {
            failures.push(Failure {
                line: line + 1,
                col: col + 1,
                directive: kind,
                reason,
            })
        };
        match catch_unwind(AssertUnwindSafe(|| run(directive))) {
            Ok(Ok(())) => {}
            Ok(Err(reason)) => fail(reason),
            Err(payload) => {
                fail(format!(
                    "panicked: {}; the remaining {} directives were not run",
                    panic_message(&*payload),
                    total - i - 1
                ));
                break;
            }
        }
    }
    FileResult::Ran(failures)
}

/// The directive's keyword as the file spells it.
pub fn directive_name(d: &WastDirective<'_>) -> &'static str {
    let is_component = |q: &QuoteWat<'_>| {
        matches!(
            q,
            QuoteWat::Wat(Wat::Component(_)) | QuoteWat::QuoteComponent(..)
        )
    };
    match d {
        WastDirective::Module(q) if is_component(q) => "component",
        WastDirective::Module(_) => "module",
        WastDirective::ModuleDefinition(q) if is_component(q) => "component definition",
        WastDirective::ModuleDefinition(_) => "module definition",
        // Both `module instance` and `component instance`: which one it is
        // depends on the definition that it names.
        WastDirective::ModuleInstance { .. } => "instance",
        WastDirective::AssertMalformed { .. } => "assert_malformed",
        WastDirective::AssertInvalid { .. } => "assert_invalid",
        WastDirective::Register { .. } => "register",
        WastDirective::Invoke(_) => "invoke",
        WastDirective::AssertTrap { .. } => "assert_trap",
        WastDirective::AssertReturn { .. } => "assert_return",
        WastDirective::AssertExhaustion { .. } => "assert_exhaustion",
        WastDirective::AssertUnlinkable { .. } => "assert_unlinkable",
        WastDirective::AssertException { .. } => "assert_exception",
        WastDirective::AssertSuspension { .. } => "assert_suspension",
        WastDirective::AssertInvalidCustom { .. } => "assert_invalid_custom",
        WastDirective::AssertMalformedCustom { .. } => "assert_malformed_custom",
        WastDirective::Thread(_) => "thread",
        WastDirective::Wait { .. } => "wait",
    }
}

/// The failure of a directive that the runner does not execute. Runners
/// reach it through a catch-all arm rather than a list of variants, so
/// that a directive a newer `wast` adds fails with this message too.
pub fn unsupported(d: &WastDirective<'_>) -> String {
    format!("unsupported directive `{}`", directive_name(d))
}
