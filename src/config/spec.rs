//! What a key may hold: its name, its built-in default and its range, as plain data. The key
//! table (`schema`) is written in these; the readers (`read`, `keys`) check values against
//! them.

/// A whole number with a range and a built-in default.
#[derive(Debug, Clone, Copy)]
pub(crate) struct IntSpec {
    pub key: &'static str,
    pub default: u64,
    pub min: u64,
    pub max: u64,
}

impl IntSpec {
    pub(crate) fn expected(&self) -> String {
        format!("an integer from {} to {}", self.min, self.max)
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct BoolSpec {
    pub key: &'static str,
    pub default: bool,
}

/// A number strictly above `above` and at most `max`.
#[derive(Debug, Clone, Copy)]
pub(crate) struct FloatSpec {
    pub key: &'static str,
    pub default: f64,
    pub above: f64,
    pub max: f64,
}

impl FloatSpec {
    pub(crate) fn expected(&self) -> String {
        format!("a number above {} and at most {}", self.above, self.max)
    }
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct ChoiceSpec<T: 'static> {
    pub key: &'static str,
    pub default: T,
    /// The spellings in the file, each with its value.
    pub options: &'static [(&'static str, T)],
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct TextSpec {
    pub key: &'static str,
    pub default: &'static str,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct ListSpec {
    pub key: &'static str,
    pub default: &'static [&'static str],
}

/// The spelling used in the file, for messages and `as_str`.
pub(crate) fn name_of<T: PartialEq + Copy>(table: &[(&'static str, T)], value: T) -> &'static str {
    table
        .iter()
        .find(|(_, v)| *v == value)
        .map(|(n, _)| *n)
        .unwrap_or("?")
}
