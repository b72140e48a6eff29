//! How a layered key is declared: once, in `schema`, as one line of a `layered!` block.
//!
//! A key of a cluster (or of its `defaults:`) used to be written in eight places: its range
//! constant, its slot in the layer struct, the slot's "unset"/"bad" constructor, its reader,
//! its pick in the merge, its field in the resolved type, that type's `Default`, and its
//! name in the reload comparison. A `layered!` block generates all of these from one
//! declaration per key (constant, field, kind with range and default, one-line meaning), and
//! the reference in docs/config.md is rendered from the same declarations (`docs`).
//!
//! The kind of a key (`Secs`, `Millis`, `Count`, `Flag`, `Number`, `OptionalCount`,
//! `TopicName`, `Patterns`) says how it is read and checked, what it becomes in the
//! resolved configuration, and how the reference describes it.

use std::time::Duration;

use regex::Regex;

use super::checks;
use super::read::{self, list, text, text_node, Set, Slot};
use super::report::Report;
use super::spec::{BoolSpec, ChoiceSpec, FloatSpec, IntSpec, ListSpec, TextSpec};
use super::yaml::Entry;

/// Compiled patterns with the text they came from.
pub(crate) type Patterns = Vec<(String, Regex)>;

/// One kind of value: how it is read (with the problems reported on the way), its built-in
/// value, what the resolved configuration holds, and how the reference describes it.
pub(crate) trait KeyKind {
    /// As read from the file, and as the built-in default.
    type Raw: Clone;
    /// As the resolved configuration holds it.
    type Out;
    fn key(&self) -> &'static str;
    fn read(&self, rep: &mut Report, e: &Entry) -> Option<Set<Self::Raw>>;
    fn builtin(&self) -> Self::Raw;
    fn out(&self, raw: Self::Raw) -> Self::Out;
    /// For the reference: the type, the built-in value and the accepted values.
    fn doc(&self) -> (&'static str, String, String);
}

fn int_range(s: &IntSpec) -> String {
    format!("{} to {}", s.min, s.max)
}

/// A duration written in whole seconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Secs(pub IntSpec);
/// A duration written in whole milliseconds.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Millis(pub IntSpec);
/// A whole number.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Count(pub IntSpec);
/// A whole number that may be left unset (or written empty); `IntSpec::default` is not
/// used: the code reading the value derives one.
#[derive(Debug, Clone, Copy)]
pub(crate) struct OptionalCount(pub IntSpec);
#[derive(Debug, Clone, Copy)]
pub(crate) struct Flag(pub BoolSpec);
/// A number with a fractional part.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Number(pub FloatSpec);
/// A Kafka topic name.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TopicName(pub TextSpec);
/// A list of regular expressions matched against whole topic names.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TopicPatterns(pub ListSpec);

/// One of a fixed set of spellings.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Choice<T: 'static>(pub ChoiceSpec<T>);

impl KeyKind for Secs {
    type Raw = u64;
    type Out = Duration;
    fn key(&self) -> &'static str {
        self.0.key
    }
    fn read(&self, rep: &mut Report, e: &Entry) -> Option<Set<u64>> {
        read::int(rep, e, &self.0)
    }
    fn builtin(&self) -> u64 {
        self.0.default
    }
    fn out(&self, raw: u64) -> Duration {
        Duration::from_secs(raw)
    }
    fn doc(&self) -> (&'static str, String, String) {
        ("seconds", self.0.default.to_string(), int_range(&self.0))
    }
}

impl KeyKind for Millis {
    type Raw = u64;
    type Out = Duration;
    fn key(&self) -> &'static str {
        self.0.key
    }
    fn read(&self, rep: &mut Report, e: &Entry) -> Option<Set<u64>> {
        read::int(rep, e, &self.0)
    }
    fn builtin(&self) -> u64 {
        self.0.default
    }
    fn out(&self, raw: u64) -> Duration {
        Duration::from_millis(raw)
    }
    fn doc(&self) -> (&'static str, String, String) {
        (
            "milliseconds",
            self.0.default.to_string(),
            int_range(&self.0),
        )
    }
}

impl KeyKind for Count {
    type Raw = u64;
    type Out = u64;
    fn key(&self) -> &'static str {
        self.0.key
    }
    fn read(&self, rep: &mut Report, e: &Entry) -> Option<Set<u64>> {
        read::int(rep, e, &self.0)
    }
    fn builtin(&self) -> u64 {
        self.0.default
    }
    fn out(&self, raw: u64) -> u64 {
        raw
    }
    fn doc(&self) -> (&'static str, String, String) {
        ("integer", self.0.default.to_string(), int_range(&self.0))
    }
}

impl KeyKind for OptionalCount {
    type Raw = Option<u16>;
    type Out = Option<u16>;
    fn key(&self) -> &'static str {
        self.0.key
    }
    fn read(&self, rep: &mut Report, e: &Entry) -> Option<Set<Option<u16>>> {
        if e.value.is_null() {
            return Some(Set {
                value: None,
                key_pos: e.key_pos,
                value_pos: e.value.pos,
            });
        }
        let v = read::int(rep, e, &self.0)?;
        Some(Set {
            value: u16::try_from(v.value).ok(),
            key_pos: v.key_pos,
            value_pos: v.value_pos,
        })
    }
    fn builtin(&self) -> Option<u16> {
        None
    }
    fn out(&self, raw: Option<u16>) -> Option<u16> {
        raw
    }
    fn doc(&self) -> (&'static str, String, String) {
        ("integer", "unset (derived)".into(), int_range(&self.0))
    }
}

impl KeyKind for Flag {
    type Raw = bool;
    type Out = bool;
    fn key(&self) -> &'static str {
        self.0.key
    }
    fn read(&self, rep: &mut Report, e: &Entry) -> Option<Set<bool>> {
        read::boolean(rep, e)
    }
    fn builtin(&self) -> bool {
        self.0.default
    }
    fn out(&self, raw: bool) -> bool {
        raw
    }
    fn doc(&self) -> (&'static str, String, String) {
        ("boolean", self.0.default.to_string(), "true, false".into())
    }
}

impl KeyKind for Number {
    type Raw = f64;
    type Out = f64;
    fn key(&self) -> &'static str {
        self.0.key
    }
    fn read(&self, rep: &mut Report, e: &Entry) -> Option<Set<f64>> {
        read::float(rep, e, &self.0)
    }
    fn builtin(&self) -> f64 {
        self.0.default
    }
    fn out(&self, raw: f64) -> f64 {
        raw
    }
    fn doc(&self) -> (&'static str, String, String) {
        (
            "number",
            format!("{:?}", self.0.default),
            format!("above {:?}, at most {:?}", self.0.above, self.0.max),
        )
    }
}

impl KeyKind for TopicName {
    type Raw = String;
    type Out = String;
    fn key(&self) -> &'static str {
        self.0.key
    }
    fn read(&self, rep: &mut Report, e: &Entry) -> Option<Set<String>> {
        let t = text(rep, e, "a Kafka topic name")?;
        match checks::topic_name(&t.value) {
            Ok(()) => Some(t),
            Err((m, x)) => {
                rep.add(t.value_pos, m, Some(x));
                None
            }
        }
    }
    fn builtin(&self) -> String {
        self.0.default.to_string()
    }
    fn out(&self, raw: String) -> String {
        raw
    }
    fn doc(&self) -> (&'static str, String, String) {
        (
            "text",
            format!("`{}`", self.0.default),
            "a Kafka topic name".into(),
        )
    }
}

impl KeyKind for TopicPatterns {
    type Raw = Patterns;
    type Out = Patterns;
    fn key(&self) -> &'static str {
        self.0.key
    }
    fn read(&self, rep: &mut Report, e: &Entry) -> Option<Set<Patterns>> {
        let expected = "a list of regular expressions";
        let items = list(rep, e, expected, true)?;
        let mut out = Vec::new();
        let mut ok = true;
        for item in items {
            let Some(src) = text_node(rep, item, &e.key, expected) else {
                ok = false;
                continue;
            };
            match checks::pattern(&src) {
                Ok(re) => out.push((src, re)),
                Err((m, x)) => {
                    rep.add(item.pos, m, Some(x));
                    ok = false;
                }
            }
        }
        ok.then(|| Set {
            value: out,
            key_pos: e.key_pos,
            value_pos: e.value.pos,
        })
    }
    fn builtin(&self) -> Patterns {
        // The built-in patterns are constants known to compile.
        self.0
            .default
            .iter()
            .filter_map(|p| checks::pattern(p).ok().map(|r| (p.to_string(), r)))
            .collect()
    }
    fn out(&self, raw: Patterns) -> Patterns {
        raw
    }
    fn doc(&self) -> (&'static str, String, String) {
        let list: Vec<String> = self.0.default.iter().map(|p| format!("`{p}`")).collect();
        (
            "list of regexes",
            format!("[{}]", list.join(", ")),
            "regular expressions, each matched against the whole topic name".into(),
        )
    }
}

impl<T: Copy + PartialEq + 'static> KeyKind for Choice<T> {
    type Raw = T;
    type Out = T;
    fn key(&self) -> &'static str {
        self.0.key
    }
    fn read(&self, rep: &mut Report, e: &Entry) -> Option<Set<T>> {
        read::choice(rep, e, self.0.options)
    }
    fn builtin(&self) -> T {
        self.0.default
    }
    fn out(&self, raw: T) -> T {
        raw
    }
    fn doc(&self) -> (&'static str, String, String) {
        let names: Vec<&str> = self.0.options.iter().map(|(n, _)| *n).collect();
        (
            "choice",
            super::spec::name_of(self.0.options, self.0.default).to_string(),
            names.join(", "),
        )
    }
}

/// A whole block is `Unset` when absent and `Bad` when it is not a mapping.
#[derive(Clone, Copy)]
pub(crate) enum SlotKind {
    Unset,
    Bad,
}

/// The block under `key` of `f`, read by `read` from its opened mapping (the keys nobody
/// asked for are reported after it); `all(Unset)` when the block is absent, `all(Bad)` when
/// it is not a mapping.
pub(crate) fn read_block<T>(
    rep: &mut Report,
    f: &mut read::Fields,
    key: &'static str,
    all: impl Fn(SlotKind) -> T,
    read: impl FnOnce(&mut Report, &mut read::Fields) -> T,
) -> T {
    let Some(e) = f.get(key) else {
        return all(SlotKind::Unset);
    };
    let Some(mut block) = read::Fields::open(rep, &e.value, Some(e), f.child(key)) else {
        return all(SlotKind::Bad);
    };
    let layer = read(rep, &mut block);
    block.finish(rep, &|_| None);
    layer
}

impl SlotKind {
    pub(crate) fn make<T>(self) -> Slot<T> {
        match self {
            SlotKind::Unset => Slot::Unset,
            SlotKind::Bad => Slot::Bad,
        }
    }
}

/// What a reload (SIGHUP) does with a changed key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reload {
    /// Applied at once.
    Live,
    /// Applied by restarting that cluster's probes, canary and evaluator.
    Cluster,
    /// Kept at its running value until the process restarts (the reload logs it).
    Restart,
}

impl Reload {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Reload::Live => "live",
            Reload::Cluster => "cluster",
            Reload::Restart => "restart",
        }
    }
}

/// One line of the reference.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct DocRow {
    pub key: &'static str,
    pub ty: &'static str,
    pub default: String,
    pub range: String,
    pub reload: Reload,
    pub meaning: String,
}

impl DocRow {
    pub(crate) fn of(kind: &impl KeyKind, reload: Reload, meaning: &[&str]) -> Self {
        let (ty, default, range) = kind.doc();
        DocRow {
            key: kind.key(),
            ty,
            default,
            range,
            reload,
            meaning: meaning
                .iter()
                .map(|l| l.trim())
                .collect::<Vec<_>>()
                .join(" "),
        }
    }
}

/// Declares a block of keys. For each key: a constant (its kind, with name, range and
/// default), a field of the resolved struct (documented by the key's one-line meaning), a
/// slot of the layer read from one mapping, a pick in the merge (cluster, else
/// `defaults:`, else built in; `alone` for a block without `defaults:`), the built-in value
/// in `Default`, and a row of the reference. With `diff Owner`, also the names of the keys
/// that differ between two `Owner`s (which must hold the resolved fields by the same
/// names), for the reload plan.
///
/// Keys are read in the order declared, which is the order "expected one of" lists them.
macro_rules! layered {
    // A key's own reload class (`@reload Restart` before its constant) wins over its block's.
    (@reload $Block:ident) => { $crate::config::keys::Reload::$Block };
    (@reload $Block:ident $Key:ident) => { $crate::config::keys::Reload::$Key };
    (
        $(#[$meta:meta])*
        $vis:vis struct $Values:ident;
        layer $Layer:ident;
        picked $Picked:ident;
        reload $Reload:ident;
        diff $Owner:ty;
        keys {
            $(
                $(#[doc = $doc:literal])+
                $(@reload $KeyReload:ident)?
                $CONST:ident $field:ident: $ty:ty = $Kind:ident $(<$KindArg:ty>)? ($spec:expr),
            )+
        }
    ) => {
        $crate::config::keys::layered! {
            $(#[$meta])*
            $vis struct $Values;
            layer $Layer;
            picked $Picked;
            reload $Reload;
            keys { $( $(#[doc = $doc])+ $(@reload $KeyReload)? $CONST $field: $ty = $Kind $(<$KindArg>)? ($spec), )+ }
        }

        impl $Values {
            /// The keys whose resolved values differ, by their names in the file.
            pub(crate) fn changed(old: &$Owner, new: &$Owner) -> Vec<&'static str> {
                use $crate::config::keys::KeyKind as _;
                let mut d = Vec::new();
                $( if old.$field != new.$field { d.push($CONST.key()); } )+
                d
            }
        }
    };
    (
        $(#[$meta:meta])*
        $vis:vis struct $Values:ident;
        layer $Layer:ident;
        picked $Picked:ident;
        reload $Reload:ident;
        keys {
            $(
                $(#[doc = $doc:literal])+
                $(@reload $KeyReload:ident)?
                $CONST:ident $field:ident: $ty:ty = $Kind:ident $(<$KindArg:ty>)? ($spec:expr),
            )+
        }
    ) => {
        $( pub(crate) const $CONST: $crate::config::keys::$Kind $(<$KindArg>)? = $crate::config::keys::$Kind($spec); )+

        $(#[$meta])*
        $vis struct $Values {
            $(
                $(#[doc = $doc])+
                pub $field: $ty,
            )+
        }

        /// The built-in values, as a configuration that does not set them gets.
        impl Default for $Values {
            fn default() -> Self {
                use $crate::config::keys::KeyKind as _;
                $Values { $( $field: $CONST.out($CONST.builtin()), )+ }
            }
        }

        /// One layer of the block as written: a cluster's own, or `defaults:`.
        pub(crate) struct $Layer {
            $( pub $field: $crate::config::read::Slot<<$crate::config::keys::$Kind $(<$KindArg>)? as $crate::config::keys::KeyKind>::Raw>, )+
        }

        /// The block once the layers are applied, each value with where it came from.
        pub(crate) struct $Picked {
            $( pub $field: Option<$crate::config::read::Resolved<<$crate::config::keys::$Kind $(<$KindArg>)? as $crate::config::keys::KeyKind>::Raw>>, )+
        }

        impl $Layer {
            pub(crate) fn all(kind: $crate::config::keys::SlotKind) -> Self {
                $Layer { $( $field: kind.make(), )+ }
            }

            /// The block's keys from a mapping already opened (the caller reports the
            /// keys nobody asked for).
            pub(crate) fn read(
                rep: &mut $crate::config::report::Report,
                f: &mut $crate::config::read::Fields,
            ) -> Self {
                use $crate::config::keys::KeyKind as _;
                $Layer {
                    $( $field: $crate::config::read::Slot::read(f.get($CONST.key()), |e| $CONST.read(rep, e)), )+
                }
            }

            /// The block under `key` of `f`: unset when absent, bad when not a mapping.
            #[allow(dead_code)]
            pub(crate) fn read_block(
                rep: &mut $crate::config::report::Report,
                f: &mut $crate::config::read::Fields,
                key: &'static str,
            ) -> Self {
                $crate::config::keys::read_block(rep, f, key, Self::all, Self::read)
            }

            /// A block with no `defaults:` layer: as written, else built in.
            #[allow(dead_code)]
            pub(crate) fn alone(&self) -> $Picked {
                self.pick(&Self::all($crate::config::keys::SlotKind::Unset))
            }

            /// Cluster value, else `defaults:` value, else built in; `None` where the
            /// winning value was written wrong.
            pub(crate) fn pick(&self, defaults: &Self) -> $Picked {
                use $crate::config::keys::KeyKind as _;
                $Picked {
                    $( $field: $crate::config::read::pick(&self.$field, &defaults.$field, $CONST.builtin()), )+
                }
            }
        }

        impl $Picked {
            /// The resolved values; `None` when any was written wrong.
            #[allow(dead_code)]
            pub(crate) fn values(&self) -> Option<$Values> {
                use $crate::config::keys::KeyKind as _;
                Some($Values {
                    $( $field: $CONST.out(self.$field.as_ref()?.value.clone()), )+
                })
            }
        }

        impl $Values {
            /// The block's rows of the reference, in declaration order.
            pub(crate) fn doc_rows() -> Vec<$crate::config::keys::DocRow> {
                vec![ $( $crate::config::keys::DocRow::of(&$CONST, $crate::config::keys::layered!(@reload $Reload $($KeyReload)?), &[$($doc),+]), )+ ]
            }
        }
    };
}
pub(crate) use layered;
