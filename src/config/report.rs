//! What is wrong in a file, and where: the ground every reader and the YAML parser write
//! their findings to.

use std::fmt;

/// A 1-based line and column (counted in characters, as editors show them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub(crate) struct Pos {
    pub line: usize,
    pub col: usize,
}

impl Pos {
    pub(crate) const START: Pos = Pos { line: 1, col: 1 };
}

/// One thing wrong in a configuration file. `line` and `column` are 1-based; the column
/// counts characters.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Problem {
    pub file: String,
    pub line: usize,
    pub column: usize,
    pub message: String,
    /// What would be right, phrased to follow the word "expected".
    pub expected: Option<String>,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}:{}: {}",
            self.file, self.line, self.column, self.message
        )?;
        if let Some(x) = &self.expected {
            write!(f, " (expected {x})")?;
        }
        Ok(())
    }
}

/// Problems found so far in one file.
pub(crate) struct Report<'f> {
    pub file: &'f str,
    pub problems: Vec<Problem>,
    /// What loads but deserves a look (a secret file others can read).
    pub warnings: Vec<Problem>,
}

impl<'f> Report<'f> {
    pub(crate) fn new(file: &'f str) -> Self {
        Report {
            file,
            problems: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// A warning: the configuration loads, and the message says what to look at.
    pub(crate) fn warn(&mut self, pos: Pos, message: String, expected: Option<String>) {
        self.warnings.push(Problem {
            file: self.file.to_string(),
            line: pos.line,
            column: pos.col,
            message,
            expected,
        });
    }

    pub(crate) fn add(&mut self, pos: Pos, message: String, expected: Option<String>) {
        self.problems.push(Problem {
            file: self.file.to_string(),
            line: pos.line,
            column: pos.col,
            message,
            expected,
        });
    }
}
