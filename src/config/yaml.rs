//! A YAML document as a tree whose every node remembers where it was written, so that a
//! problem found later, while reading the configuration, can name a line and a column.
//!
//! Aliases are expanded here into copies. A copy is what the readers need (they never
//! see anchors), and it lets one node budget bound both the document size and alias
//! bombs: a few lines of nested aliases would otherwise expand into billions of nodes.

use std::collections::HashMap;

use saphyr_parser::{Event, Parser, ScalarStyle, Span, Tag};

use super::report::Report;

/// More nodes than any sensible configuration has, few enough to build in milliseconds.
const MAX_NODES: usize = 100_000;
/// The deepest path in the schema is five levels; the margin is for flow style and aliases.
/// The bound also keeps recursive walks and drops of the tree far from the stack limit.
const MAX_DEPTH: usize = 64;

pub(crate) use super::report::Pos;

impl Pos {
    fn of(span: &Span) -> Pos {
        Pos {
            line: span.start.line(),
            col: span.start.col() + 1,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct Node {
    pub pos: Pos,
    pub kind: Kind,
}

#[derive(Debug, Clone)]
pub(crate) enum Kind {
    Scalar(Scalar),
    Seq(Vec<Node>),
    Map(Vec<Entry>),
}

#[derive(Debug, Clone)]
pub(crate) struct Scalar {
    pub text: String,
    /// Quoted and block scalars (and `!!str`) are always text; only plain ones are typed.
    pub plain: bool,
}

#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub key: String,
    pub key_pos: Pos,
    pub value: Node,
}

/// What a scalar means under the YAML 1.2 core schema.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    Null,
    Bool(bool),
    Int(i128),
    Float(f64),
    Str(&'a str),
}

impl Scalar {
    pub(crate) fn value(&self) -> Value<'_> {
        if !self.plain {
            return Value::Str(&self.text);
        }
        let t = self.text.as_str();
        match t {
            "" | "~" | "null" | "Null" | "NULL" => return Value::Null,
            "true" | "True" | "TRUE" => return Value::Bool(true),
            "false" | "False" | "FALSE" => return Value::Bool(false),
            ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
                return Value::Float(f64::INFINITY)
            }
            "-.inf" | "-.Inf" | "-.INF" => return Value::Float(f64::NEG_INFINITY),
            ".nan" | ".NaN" | ".NAN" => return Value::Float(f64::NAN),
            _ => {}
        }
        if let Some(i) = parse_int(t) {
            return Value::Int(i);
        }
        if looks_like_float(t) {
            if let Ok(f) = t.parse::<f64>() {
                return Value::Float(f);
            }
        }
        Value::Str(t)
    }
}

fn parse_int(t: &str) -> Option<i128> {
    if let Some(hex) = t.strip_prefix("0x") {
        return digits_only(hex, |c| c.is_ascii_hexdigit())
            .then(|| i128::from_str_radix(hex, 16).ok())
            .flatten();
    }
    if let Some(oct) = t.strip_prefix("0o") {
        return digits_only(oct, |c| ('0'..='7').contains(&c))
            .then(|| i128::from_str_radix(oct, 8).ok())
            .flatten();
    }
    let unsigned = t.strip_prefix(['-', '+']).unwrap_or(t);
    if digits_only(unsigned, |c| c.is_ascii_digit()) {
        // A numeral too long for i128 is still a number to the reader; it is then
        // reported as out of range rather than as text.
        return Some(t.parse::<i128>().unwrap_or(if t.starts_with('-') {
            i128::MIN
        } else {
            i128::MAX
        }));
    }
    None
}

fn digits_only(s: &str, ok: impl Fn(char) -> bool) -> bool {
    !s.is_empty() && s.chars().all(ok)
}

/// The core schema's float pattern. Rust's own parser also takes "inf", "NaN" and
/// "1." variants that YAML reads as text, hence this gate in front of it.
fn looks_like_float(t: &str) -> bool {
    let s = t.strip_prefix(['-', '+']).unwrap_or(t);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let mantissa_ok = match mantissa.split_once('.') {
        Some((int, frac)) => {
            (int.is_empty() || int.chars().all(|c| c.is_ascii_digit()))
                && frac.chars().all(|c| c.is_ascii_digit())
                && !(int.is_empty() && frac.is_empty())
        }
        None => digits_only(mantissa, |c| c.is_ascii_digit()),
    };
    let exponent_ok = match exponent {
        None => true,
        Some(e) => digits_only(e.strip_prefix(['-', '+']).unwrap_or(e), |c| {
            c.is_ascii_digit()
        }),
    };
    mantissa_ok && exponent_ok
}

impl Node {
    pub(crate) fn scalar(&self) -> Option<&Scalar> {
        match &self.kind {
            Kind::Scalar(s) => Some(s),
            _ => None,
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self.scalar().map(Scalar::value), Some(Value::Null))
    }

    /// How the node reads to a person, for "found ..." in messages.
    pub(crate) fn describe(&self) -> String {
        match &self.kind {
            Kind::Seq(_) => "a list".to_string(),
            Kind::Map(_) => "a mapping".to_string(),
            Kind::Scalar(s) => match s.value() {
                Value::Null => "no value".to_string(),
                Value::Bool(b) => format!("the boolean {b}"),
                Value::Int(_) | Value::Float(_) => format!("the number {}", s.text),
                Value::Str(t) => format!("the text '{}'", shorten(t)),
            },
        }
    }

    /// Nodes in this subtree and its height, for the alias budget.
    fn measure(&self) -> (usize, usize) {
        match &self.kind {
            Kind::Scalar(_) => (1, 1),
            Kind::Seq(items) => items.iter().fold((1, 1), |(n, h), item| {
                let (cn, ch) = item.measure();
                (n + cn, h.max(ch + 1))
            }),
            Kind::Map(entries) => entries.iter().fold((1, 1), |(n, h), e| {
                let (cn, ch) = e.value.measure();
                (n + cn + 1, h.max(ch + 1))
            }),
        }
    }
}

/// Text quoted in a message is cut short so that a pasted blob cannot flood the terminal.
pub(crate) fn shorten(t: &str) -> String {
    const MAX: usize = 60;
    let mut out: String = t
        .chars()
        .take(MAX)
        .map(|c| if c.is_control() { '?' } else { c })
        .collect();
    if t.chars().count() > MAX {
        out.push_str("...");
    }
    out
}

enum Frame {
    Seq {
        pos: Pos,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        pos: Pos,
        anchor: usize,
        /// Keys and values alternate, as the parser emits them.
        items: Vec<Node>,
    },
}

/// Parses `text` into its single document. `Ok(None)` is an empty document. Problems that
/// leave a usable tree (duplicate keys, odd tags) are recorded and the tree is returned;
/// the ones that do not (syntax errors, bombs) are recorded and give `Err(())`.
pub(crate) fn parse(text: &str, rep: &mut Report) -> Result<Option<Node>, ()> {
    let mut b = Builder {
        rep,
        stack: Vec::new(),
        anchors: HashMap::new(),
        nodes: 0,
        root: None,
        documents: 0,
    };
    for event in Parser::new_from_str(text) {
        match event {
            Ok((event, span)) => b.event(event, &span)?,
            Err(e) => {
                let pos = Pos {
                    line: e.marker().line().max(1),
                    col: e.marker().col() + 1,
                };
                b.rep
                    .add(pos, format!("YAML syntax error: {}", e.info()), None);
                return Err(());
            }
        }
    }
    Ok(b.root)
}

struct Builder<'r, 'f> {
    rep: &'r mut Report<'f>,
    stack: Vec<Frame>,
    anchors: HashMap<usize, (Node, usize, usize)>,
    nodes: usize,
    root: Option<Node>,
    documents: usize,
}

impl Builder<'_, '_> {
    fn event(&mut self, event: Event<'_>, span: &Span) -> Result<(), ()> {
        let pos = Pos::of(span);
        match event {
            Event::DocumentStart(_) => {
                self.documents += 1;
                if self.documents > 1 {
                    self.rep.add(
                        pos,
                        "a second YAML document starts here".to_string(),
                        Some("a single document".to_string()),
                    );
                    return Err(());
                }
            }
            Event::Scalar(text, style, anchor, tag) => {
                let plain = style == ScalarStyle::Plain && !self.is_str_tag(tag.as_deref(), pos);
                let node = Node {
                    pos,
                    kind: Kind::Scalar(Scalar {
                        text: text.into_owned(),
                        plain,
                    }),
                };
                self.count(1, 1, pos)?;
                self.finish_node(node, anchor)?;
            }
            Event::SequenceStart(anchor, tag) => {
                self.check_collection_tag(tag.as_deref(), "seq", pos);
                self.open(pos)?;
                self.stack.push(Frame::Seq {
                    pos,
                    anchor,
                    items: Vec::new(),
                });
            }
            Event::MappingStart(anchor, tag) => {
                self.check_collection_tag(tag.as_deref(), "map", pos);
                self.open(pos)?;
                self.stack.push(Frame::Map {
                    pos,
                    anchor,
                    items: Vec::new(),
                });
            }
            Event::SequenceEnd | Event::MappingEnd => {
                let (node, anchor) = match self.stack.pop() {
                    Some(Frame::Seq { pos, anchor, items }) => (
                        Node {
                            pos,
                            kind: Kind::Seq(items),
                        },
                        anchor,
                    ),
                    Some(Frame::Map { pos, anchor, items }) => (
                        Node {
                            pos,
                            kind: Kind::Map(self.pair_up(items)),
                        },
                        anchor,
                    ),
                    // The parser balances its events; this is only reached if it did not.
                    None => {
                        self.rep
                            .add(pos, "YAML syntax error: unbalanced collection".into(), None);
                        return Err(());
                    }
                };
                self.finish_node(node, anchor)?;
            }
            Event::Alias(id) => {
                let Some((node, size, height)) = self.anchors.get(&id) else {
                    self.rep.add(
                        pos,
                        "alias refers to an anchor that is not complete here".into(),
                        Some("an alias after the end of the anchored node".into()),
                    );
                    return Err(());
                };
                let (node, size, height) = (node.clone(), *size, *height);
                self.count(size, height, pos)?;
                // The copy keeps the anchored node's positions: that is where a problem in
                // it has to be fixed.
                self.finish_node(node, 0)?;
            }
            Event::StreamStart | Event::StreamEnd | Event::DocumentEnd | Event::Nothing => {}
        }
        Ok(())
    }

    fn open(&mut self, pos: Pos) -> Result<(), ()> {
        if self.stack.len() >= MAX_DEPTH {
            self.rep.add(
                pos,
                format!("nesting deeper than {MAX_DEPTH} levels"),
                Some("a configuration of a few levels".into()),
            );
            return Err(());
        }
        self.count(1, 1, pos)
    }

    fn count(&mut self, size: usize, height: usize, pos: Pos) -> Result<(), ()> {
        self.nodes = self.nodes.saturating_add(size);
        if self.nodes > MAX_NODES {
            self.rep.add(
                pos,
                format!("the document expands to more than {MAX_NODES} YAML nodes (aliases count once per use)"),
                Some("a configuration without alias bombs".into()),
            );
            return Err(());
        }
        if self.stack.len() + height > MAX_DEPTH {
            self.rep.add(
                pos,
                format!("alias expands to nesting deeper than {MAX_DEPTH} levels"),
                Some("a configuration of a few levels".into()),
            );
            return Err(());
        }
        Ok(())
    }

    fn finish_node(&mut self, node: Node, anchor: usize) -> Result<(), ()> {
        if anchor != 0 {
            let (size, height) = node.measure();
            // The stored copy costs as much as an alias use; counting it keeps nested
            // anchors from multiplying copies outside the budget.
            self.count(size, 0, node.pos)?;
            self.anchors.insert(anchor, (node.clone(), size, height));
        }
        match self.stack.last_mut() {
            Some(Frame::Seq { items, .. }) | Some(Frame::Map { items, .. }) => items.push(node),
            None => self.root = Some(node),
        }
        Ok(())
    }

    fn pair_up(&mut self, items: Vec<Node>) -> Vec<Entry> {
        let mut entries: Vec<Entry> = Vec::with_capacity(items.len() / 2);
        let mut it = items.into_iter();
        while let (Some(k), Some(value)) = (it.next(), it.next()) {
            let key = match &k.kind {
                Kind::Scalar(s) => s.text.clone(),
                _ => {
                    self.rep.add(
                        k.pos,
                        format!("{} used as a mapping key", k.describe()),
                        Some("a plain key name".into()),
                    );
                    continue;
                }
            };
            if let Some(first) = entries.iter().find(|e| e.key == key) {
                self.rep.add(
                    k.pos,
                    format!(
                        "duplicate key '{}' (first set at line {})",
                        shorten(&key),
                        first.key_pos.line
                    ),
                    Some("each key once per mapping".into()),
                );
                continue;
            }
            entries.push(Entry {
                key,
                key_pos: k.pos,
                value,
            });
        }
        entries
    }

    /// `!!str` makes a plain scalar text; the other core tags agree with what the plain
    /// scalar already is. Custom tags mean nothing to this schema.
    fn is_str_tag(&mut self, tag: Option<&Tag>, pos: Pos) -> bool {
        match tag {
            None => false,
            Some(t) if t.is_yaml_core_schema() => match t.suffix.as_str() {
                "str" => true,
                "int" | "float" | "bool" | "null" => false,
                _ => {
                    self.unsupported_tag(t, pos);
                    false
                }
            },
            Some(t) => {
                self.unsupported_tag(t, pos);
                false
            }
        }
    }

    fn check_collection_tag(&mut self, tag: Option<&Tag>, want: &str, pos: Pos) {
        if let Some(t) = tag {
            if !(t.is_yaml_core_schema() && t.suffix == want) {
                self.unsupported_tag(t, pos);
            }
        }
    }

    fn unsupported_tag(&mut self, t: &Tag, pos: Pos) {
        self.rep.add(
            pos,
            format!(
                "YAML tag '{}' is not supported here",
                shorten(&t.to_string())
            ),
            Some("an untagged value".into()),
        );
    }
}
