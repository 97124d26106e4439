//! The command line of a `harness = false` suite that selects `.wast`
//! files, compatible with what libtest-driven runners pass.

/// Command-line selection: the file-name filters and the libtest flags
/// that change what a run selects or does.
pub struct Args {
    /// The arguments that are not flags; a file is selected if its name
    /// contains one of them (or equals one, with `--exact`).
    pub filters: Vec<String>,
    /// `--exact`: filters match whole names.
    pub exact: bool,
    /// `--list`: print the selected files instead of running them, so
    /// that runners that list tests first (nextest) can drive the binary
    /// file by file.
    pub list: bool,
    /// `--ignored`: run only the ignored tests.
    pub ignored: bool,
}

impl Args {
    /// Reads the process's arguments.
    pub fn parse() -> Args {
        let mut args = Args {
            filters: Vec::new(),
            exact: false,
            list: false,
            ignored: false,
        };
        let mut iter = std::env::args().skip(1);
        while let Some(arg) = iter.next() {
            match arg.as_str() {
                "--list" => args.list = true,
                "--exact" => args.exact = true,
                "--ignored" => args.ignored = true,
                // libtest flags that take a value, which is not a filter.
                "--test-threads" | "--skip" | "--format" | "--color" | "--logfile" | "-Z" => {
                    iter.next();
                }
                s if s.starts_with('-') => {}
                _ => args.filters.push(arg),
            }
        }
        args
    }

    /// Whether the file `name` is selected.
    pub fn selects(&self, name: &str) -> bool {
        // No file is `#[ignore]`d, so a run of ignored tests selects none.
        if self.ignored {
            return false;
        }
        self.filters.is_empty()
            || self.filters.iter().any(|f| {
                if self.exact {
                    name == f
                } else {
                    name.contains(f.as_str())
                }
            })
    }
}
