//! [`Value`]: the data a snapshot file holds, as Python sees it (the values of `pickle` and JSON
//! that a memory snapshot uses), and the typed reads that turn it into a [`Snapshot`](super::Snapshot)
//! with errors that name the path of the bad field (`segments[2].blocks[0].size`).

use std::fmt;

/// One value of a snapshot file: what `pickle.loads` or `json.loads` gives for it in Python.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `None` / `null`.
    None,
    /// `bool`.
    Bool(bool),
    /// `int` (snapshots hold addresses, sizes and stream handles: 64 bits are enough).
    Int(i64),
    /// `float`.
    Float(f64),
    /// `str`.
    Str(String),
    /// `list`.
    List(Vec<Value>),
    /// `tuple` (JSON has none: it reads back as a list).
    Tuple(Vec<Value>),
    /// `dict`, in insertion order.
    Dict(Vec<(Value, Value)>),
}

impl Value {
    /// Python's name of the value's type, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Value::None => "None",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float",
            Value::Str(_) => "str",
            Value::List(_) => "list",
            Value::Tuple(_) => "tuple",
            Value::Dict(_) => "dict",
        }
    }

    /// The value under the string key `key` of a dict (`None` for a missing key or a non-dict).
    pub fn get(&self, key: &str) -> Option<&Value> {
        match self {
            Value::Dict(items) => items
                .iter()
                .find(|(k, _)| matches!(k, Value::Str(s) if s == key))
                .map(|(_, v)| v),
            _ => None,
        }
    }

    /// A dict with string keys, from `(key, value)` pairs.
    pub fn dict<'a>(items: impl IntoIterator<Item = (&'a str, Value)>) -> Value {
        Value::Dict(
            items
                .into_iter()
                .map(|(k, v)| (Value::Str(k.to_owned()), v))
                .collect(),
        )
    }
}

impl From<&str> for Value {
    fn from(s: &str) -> Self {
        Value::Str(s.to_owned())
    }
}

impl From<String> for Value {
    fn from(s: String) -> Self {
        Value::Str(s)
    }
}

impl From<i64> for Value {
    fn from(i: i64) -> Self {
        Value::Int(i)
    }
}

impl From<bool> for Value {
    fn from(b: bool) -> Self {
        Value::Bool(b)
    }
}

/// Where in a snapshot a field is (`segments[2].blocks[0].size`), for error messages.
#[derive(Clone, Debug, Default)]
pub(crate) struct FieldPath(String);

impl FieldPath {
    /// The path of field `name` under this one.
    pub(crate) fn key(&self, name: &str) -> FieldPath {
        if self.0.is_empty() {
            FieldPath(name.to_owned())
        } else {
            FieldPath(format!("{}.{name}", self.0))
        }
    }

    /// The path of item `i` of this list.
    pub(crate) fn index(&self, i: usize) -> FieldPath {
        FieldPath(format!("{}[{i}]", self.0))
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            f.write_str("the top level")
        } else {
            f.write_str(&self.0)
        }
    }
}

/// A snapshot whose data does not have the expected shape: where, and what was found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShapeError(pub(crate) String);

impl std::error::Error for ShapeError {}

impl fmt::Display for ShapeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn wrong(path: &FieldPath, expected: &str, found: &Value) -> ShapeError {
    ShapeError(format!(
        "{path}: expected {expected}, found {}",
        found.type_name()
    ))
}

/// Typed reads of a [`Value`] at a [`FieldPath`].
pub(crate) struct Field<'a> {
    pub(crate) value: &'a Value,
    pub(crate) path: FieldPath,
}

impl<'a> Field<'a> {
    pub(crate) fn new(value: &'a Value, path: FieldPath) -> Self {
        Self { value, path }
    }

    /// The required field `name` of this dict.
    pub(crate) fn req(&self, name: &str) -> Result<Field<'a>, ShapeError> {
        self.opt(name)?
            .ok_or_else(|| ShapeError(format!("{}: missing", self.path.key(name))))
    }

    /// The field `name` of this dict, if present and not `None`.
    pub(crate) fn opt(&self, name: &str) -> Result<Option<Field<'a>>, ShapeError> {
        if !matches!(self.value, Value::Dict(_)) {
            return Err(wrong(&self.path, "a dict", self.value));
        }
        Ok(self
            .value
            .get(name)
            .filter(|v| !matches!(v, Value::None))
            .map(|v| Field::new(v, self.path.key(name))))
    }

    pub(crate) fn int(&self) -> Result<i64, ShapeError> {
        match self.value {
            Value::Int(i) => Ok(*i),
            // Python's bool is an int.
            Value::Bool(b) => Ok(i64::from(*b)),
            // JSON readers may hand integral floats back.
            Value::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => Ok(*f as i64),
            v => Err(wrong(&self.path, "an int", v)),
        }
    }

    /// An int that must not be negative (sizes, addresses).
    pub(crate) fn uint(&self) -> Result<u64, ShapeError> {
        let i = self.int()?;
        u64::try_from(i).map_err(|_| ShapeError(format!("{}: {i} is negative", self.path)))
    }

    pub(crate) fn str(&self) -> Result<&'a str, ShapeError> {
        match self.value {
            Value::Str(s) => Ok(s),
            v => Err(wrong(&self.path, "a str", v)),
        }
    }

    /// The items of a list (or tuple).
    pub(crate) fn items(&self) -> Result<impl Iterator<Item = Field<'a>> + 'a, ShapeError> {
        match self.value {
            Value::List(items) | Value::Tuple(items) => {
                let path = self.path.clone();
                Ok(items
                    .iter()
                    .enumerate()
                    .map(move |(i, v)| Field::new(v, path.index(i))))
            }
            v => Err(wrong(&self.path, "a list", v)),
        }
    }
}
