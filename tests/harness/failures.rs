//! What running one `.wast` file produced, and the text that reports it;
//! the same for every suite, so that their reports read alike.

/// Failing directives printed per file; a broken module or component tends
/// to make every later directive fail as well, and those add nothing.
const MAX_REPORTED_PER_FILE: usize = 25;

/// One directive that did not behave as the file says.
pub struct Failure {
    /// 1-based line of the directive.
    pub line: usize,
    /// 1-based column of the directive.
    pub col: usize,
    /// The directive's keyword, e.g. `assert_return`.
    pub directive: &'static str,
    /// What went wrong.
    pub reason: String,
}

/// What running one file produced: its failing directives, or why it could
/// not be run at all.
pub enum FileResult {
    /// Every directive ran; these are the ones that failed.
    Ran(Vec<Failure>),
    /// The file could not be run (parse error, engine setup, panic outside
    /// a directive).
    Broken(String),
}

impl FileResult {
    /// Whether the file passed.
    pub fn passed(&self) -> bool {
        matches!(self, FileResult::Ran(failures) if failures.is_empty())
    }
}

/// The text of a panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "<non-string panic payload>".to_string())
}

/// The text printed for a failing file, or `None` if it passed.
/// `broken_prefix` goes before the reason of a file that could not be run.
pub fn report(name: &str, result: &FileResult, broken_prefix: &str) -> Option<String> {
    match result {
        result if result.passed() => None,
        FileResult::Ran(failures) => {
            let mut text = format!("FAIL {name}: {} failing directives\n", failures.len());
            for f in failures.iter().take(MAX_REPORTED_PER_FILE) {
                let reason = f.reason.replace('\n', "\n      ");
                text.push_str(&format!(
                    "  {name}:{}:{}: {}: {reason}\n",
                    f.line, f.col, f.directive
                ));
            }
            if failures.len() > MAX_REPORTED_PER_FILE {
                text.push_str(&format!(
                    "  ... and {} more\n",
                    failures.len() - MAX_REPORTED_PER_FILE
                ));
            }
            Some(text)
        }
        FileResult::Broken(why) => {
            // Indented like a failing directive's reason, so that a
            // multi-line parse error stays under its file.
            let why = why.replace('\n', "\n      ");
            Some(format!("FAIL {name}: {broken_prefix}{why}\n"))
        }
    }
}
