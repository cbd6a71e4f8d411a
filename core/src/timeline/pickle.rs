//! The pickle format of memory snapshots: a writer of protocol 2 (what PyTorch's
//! `torch.cuda.memory._snapshot()` files use) and a reader that accepts data only.
//!
//! The writer emits dicts, lists, tuples, strings, ints, floats, bools and `None`, memoizing each
//! distinct string and each shared list (a call stack many events share) once, so a long trace stays
//! small. Python's `pickle.load` and PyTorch's memory_viz read it.
//!
//! The reader runs the pickle machine over the opcodes that build such data (protocols 0 to 5, with
//! the memo, so PyTorch's own snapshots load too) and refuses every opcode that names a class or
//! calls one (`GLOBAL`, `REDUCE`, `BUILD`, ...): loading a snapshot never runs code. A truncated or
//! corrupt file is a [`PickleError`] naming the byte offset and what is wrong; nesting, sharing and
//! sizes are bounded so that no input makes it recurse without end or allocate without bound.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;
use std::rc::Rc;

use super::value::Value;

const PROTO: u8 = 0x80;
const STOP: u8 = b'.';
const NONE: u8 = b'N';
const NEWTRUE: u8 = 0x88;
const NEWFALSE: u8 = 0x89;
const BININT: u8 = b'J';
const BININT1: u8 = b'K';
const BININT2: u8 = b'M';
const LONG1: u8 = 0x8a;
const LONG4: u8 = 0x8b;
const BINFLOAT: u8 = b'G';
const BINUNICODE: u8 = b'X';
const SHORT_BINUNICODE: u8 = 0x8c;
const BINUNICODE8: u8 = 0x8d;
const EMPTY_DICT: u8 = b'}';
const EMPTY_LIST: u8 = b']';
const EMPTY_TUPLE: u8 = b')';
const MARK: u8 = b'(';
const SETITEM: u8 = b's';
const SETITEMS: u8 = b'u';
const APPEND: u8 = b'a';
const APPENDS: u8 = b'e';
const TUPLE: u8 = b't';
const TUPLE1: u8 = 0x85;
const TUPLE2: u8 = 0x86;
const TUPLE3: u8 = 0x87;
const LIST: u8 = b'l';
const DICT: u8 = b'd';
const BINPUT: u8 = b'q';
const LONG_BINPUT: u8 = b'r';
const MEMOIZE: u8 = 0x94;
const BINGET: u8 = b'h';
const LONG_BINGET: u8 = b'j';
const PUT: u8 = b'p';
const GET: u8 = b'g';
const INT: u8 = b'I';
const LONG: u8 = b'L';
const FLOAT: u8 = b'F';
const POP: u8 = b'0';
const POP_MARK: u8 = b'1';
const DUP: u8 = b'2';
const FRAME: u8 = 0x95;

/// Items per `SETITEMS` / `APPENDS` batch (Python's own batch size).
const BATCH: usize = 1000;

/// Writes pickle protocol 2.
pub(crate) struct Pickler {
    out: Vec<u8>,
    memo: u32,
    strings: HashMap<String, u32>,
    shared: HashMap<usize, u32>,
}

impl Pickler {
    pub(crate) fn new() -> Self {
        Self {
            out: vec![PROTO, 2],
            memo: 0,
            strings: HashMap::new(),
            shared: HashMap::new(),
        }
    }

    /// The bytes, ended with `STOP`.
    pub(crate) fn finish(mut self) -> Vec<u8> {
        self.out.push(STOP);
        self.out
    }

    fn put(&mut self) -> u32 {
        let index = self.memo;
        self.memo += 1;
        if let Ok(short) = u8::try_from(index) {
            self.out.extend_from_slice(&[BINPUT, short]);
        } else {
            self.out.push(LONG_BINPUT);
            self.out.extend_from_slice(&index.to_le_bytes());
        }
        index
    }

    fn get(&mut self, index: u32) {
        if let Ok(short) = u8::try_from(index) {
            self.out.extend_from_slice(&[BINGET, short]);
        } else {
            self.out.push(LONG_BINGET);
            self.out.extend_from_slice(&index.to_le_bytes());
        }
    }

    pub(crate) fn none(&mut self) {
        self.out.push(NONE);
    }

    pub(crate) fn boolean(&mut self, b: bool) {
        self.out.push(if b { NEWTRUE } else { NEWFALSE });
    }

    pub(crate) fn int(&mut self, i: i64) {
        if let Ok(small) = u8::try_from(i) {
            self.out.extend_from_slice(&[BININT1, small]);
        } else if let Ok(small) = u16::try_from(i) {
            self.out.push(BININT2);
            self.out.extend_from_slice(&small.to_le_bytes());
        } else if let Ok(word) = i32::try_from(i) {
            self.out.push(BININT);
            self.out.extend_from_slice(&word.to_le_bytes());
        } else {
            // Two's complement, little-endian, as few bytes as keep the sign.
            let bytes = i.to_le_bytes();
            let mut n = 8;
            while n > 1 {
                let top = bytes[n - 1];
                let next_sign = bytes[n - 2] & 0x80;
                if (top == 0 && next_sign == 0) || (top == 0xff && next_sign != 0) {
                    n -= 1;
                } else {
                    break;
                }
            }
            self.out.extend_from_slice(&[LONG1, n as u8]);
            self.out.extend_from_slice(&bytes[..n]);
        }
    }

    pub(crate) fn float(&mut self, f: f64) {
        self.out.push(BINFLOAT);
        self.out.extend_from_slice(&f.to_be_bytes());
    }

    /// A string, memoized: its second use costs two bytes.
    pub(crate) fn str(&mut self, s: &str) {
        if let Some(&index) = self.strings.get(s) {
            self.get(index);
            return;
        }
        self.out.push(BINUNICODE);
        self.out.extend_from_slice(&(s.len() as u32).to_le_bytes());
        self.out.extend_from_slice(s.as_bytes());
        let index = self.put();
        self.strings.insert(s.to_owned(), index);
    }

    /// A dict of `entries` string keys, each value written by `f(self, i)`.
    pub(crate) fn dict_with(&mut self, keys: &[&str], mut f: impl FnMut(&mut Self, usize)) {
        self.out.push(EMPTY_DICT);
        for (chunk_start, chunk) in keys.chunks(BATCH).enumerate().map(|(c, k)| (c * BATCH, k)) {
            self.out.push(MARK);
            for (i, key) in chunk.iter().enumerate() {
                self.str(key);
                f(self, chunk_start + i);
            }
            self.out.push(SETITEMS);
        }
    }

    /// A list of `len` items, each written by `f(self, i)`.
    pub(crate) fn list_with(&mut self, len: usize, mut f: impl FnMut(&mut Self, usize)) {
        self.out.push(EMPTY_LIST);
        let mut i = 0;
        while i < len {
            self.out.push(MARK);
            let end = (i + BATCH).min(len);
            while i < end {
                f(self, i);
                i += 1;
            }
            self.out.push(APPENDS);
        }
    }

    /// A list that several places share (identified by `identity`, e.g. an `Arc`'s address): written
    /// once, then referenced. The caller must not change what `identity` names while writing.
    pub(crate) fn shared_list_with(
        &mut self,
        identity: usize,
        len: usize,
        f: impl FnMut(&mut Self, usize),
    ) {
        if let Some(&index) = self.shared.get(&identity) {
            self.get(index);
            return;
        }
        self.list_with(len, f);
        let index = self.put();
        self.shared.insert(identity, index);
    }

    /// A tuple of two ints.
    pub(crate) fn int_pair(&mut self, a: i64, b: i64) {
        self.int(a);
        self.int(b);
        self.out.push(TUPLE2);
    }

    /// Any [`Value`].
    pub(crate) fn value(&mut self, v: &Value) {
        match v {
            Value::None => self.none(),
            Value::Bool(b) => self.boolean(*b),
            Value::Int(i) => self.int(*i),
            Value::Float(f) => self.float(*f),
            Value::Str(s) => self.str(s),
            Value::List(items) => self.list_with(items.len(), |p, i| p.value(&items[i])),
            Value::Tuple(items) => {
                self.out.push(MARK);
                for item in items {
                    self.value(item);
                }
                self.out.push(TUPLE);
            }
            Value::Dict(items) => {
                self.out.push(EMPTY_DICT);
                for chunk in items.chunks(BATCH) {
                    self.out.push(MARK);
                    for (k, v) in chunk {
                        self.value(k);
                        self.value(v);
                    }
                    self.out.push(SETITEMS);
                }
            }
        }
    }
}

/// `value` as pickle protocol 2.
pub fn to_pickle(value: &Value) -> Vec<u8> {
    let mut p = Pickler::new();
    p.value(value);
    p.finish()
}

/// A pickle that is not a snapshot's data: where, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PickleError {
    /// The byte offset of the opcode (or of the end of the data, when it ends too early).
    pub offset: usize,
    /// What is wrong.
    pub message: String,
}

impl std::error::Error for PickleError {}

impl fmt::Display for PickleError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.message)
    }
}

/// How deep containers may nest (a snapshot nests 5 deep; more is a cycle or corrupt data).
const MAX_DEPTH: usize = 64;
/// How many values a file may expand to when shared containers are copied out, per byte of input
/// and at least (stops a small file whose lists reference each other from expanding
/// exponentially; a real snapshot, whose shared lists are call stacks, expands a few times).
const VALUES_PER_BYTE: usize = 64;
const MIN_VALUES: usize = 1 << 20;
/// Memo entries at most (each takes at least two bytes of input, so a real file stays far below).
const MAX_MEMO: usize = 1 << 28;

/// An object on the pickle machine's stack; containers are shared because the memo refers to them
/// while they are still being filled.
#[derive(Clone)]
enum Obj {
    Scalar(Value),
    List(Rc<RefCell<Vec<Obj>>>),
    Dict(Rc<RefCell<Vec<(Obj, Obj)>>>),
    Tuple(Rc<Vec<Obj>>),
}

struct Machine<'a> {
    data: &'a [u8],
    pos: usize,
    /// Where the current opcode started.
    at: usize,
    stack: Vec<Obj>,
    marks: Vec<usize>,
    memo: HashMap<u64, Obj>,
}

impl<'a> Machine<'a> {
    fn error(&self, message: impl Into<String>) -> PickleError {
        PickleError {
            offset: self.at,
            message: message.into(),
        }
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], PickleError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|&end| end <= self.data.len())
            .ok_or_else(|| PickleError {
                offset: self.data.len(),
                message: format!(
                    "the data ends early: the opcode at byte {} needs {n} more bytes, {} are left (a truncated file?)",
                    self.at,
                    self.data.len() - self.pos.min(self.data.len())
                ),
            })?;
        let bytes = &self.data[self.pos..end];
        self.pos = end;
        Ok(bytes)
    }

    fn byte(&mut self) -> Result<u8, PickleError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, PickleError> {
        Ok(u32::from_le_bytes(
            self.take(4)?.try_into().unwrap_or_default(),
        ))
    }

    fn u64(&mut self) -> Result<u64, PickleError> {
        Ok(u64::from_le_bytes(
            self.take(8)?.try_into().unwrap_or_default(),
        ))
    }

    /// A text line (protocol 0 arguments), without its newline.
    fn line(&mut self) -> Result<&'a str, PickleError> {
        let rest = &self.data[self.pos..];
        let n = rest
            .iter()
            .position(|&b| b == b'\n')
            .ok_or_else(|| PickleError {
                offset: self.data.len(),
                message: format!(
                    "the data ends early: the opcode at byte {} has no end of line",
                    self.at
                ),
            })?;
        let line = std::str::from_utf8(&rest[..n])
            .map_err(|_| self.error("an argument line that is not text"))?;
        self.pos += n + 1;
        Ok(line)
    }

    fn text(&mut self, len: usize) -> Result<Obj, PickleError> {
        let bytes = self.take(len)?;
        let s = std::str::from_utf8(bytes)
            .map_err(|_| self.error("a string that is not valid UTF-8"))?;
        Ok(Obj::Scalar(Value::Str(s.to_owned())))
    }

    fn push(&mut self, obj: Obj) {
        self.stack.push(obj);
    }

    fn pop(&mut self) -> Result<Obj, PickleError> {
        if self.stack.len() <= self.marks.last().copied().unwrap_or(0) {
            return Err(self.error("the stack is empty where a value is needed"));
        }
        self.stack
            .pop()
            .ok_or_else(|| self.error("the stack is empty where a value is needed"))
    }

    fn top(&self) -> Result<&Obj, PickleError> {
        if self.stack.len() <= self.marks.last().copied().unwrap_or(0) {
            return Err(self.error("the stack is empty where a value is needed"));
        }
        self.stack
            .last()
            .ok_or_else(|| self.error("the stack is empty where a value is needed"))
    }

    /// The items above the last mark, and the mark removed.
    fn pop_mark(&mut self) -> Result<Vec<Obj>, PickleError> {
        let mark = self
            .marks
            .pop()
            .ok_or_else(|| self.error("no MARK before this opcode"))?;
        Ok(self.stack.split_off(mark))
    }

    fn memo_put(&mut self, index: u64) -> Result<(), PickleError> {
        let top = self.top()?.clone();
        if self.memo.len() >= MAX_MEMO {
            return Err(self.error("too many memo entries"));
        }
        self.memo.insert(index, top);
        Ok(())
    }

    fn memo_get(&mut self, index: u64) -> Result<(), PickleError> {
        let obj = self.memo.get(&index).cloned().ok_or_else(|| {
            self.error(format!("memo entry {index} is read before it is written"))
        })?;
        self.push(obj);
        Ok(())
    }

    fn append(&mut self, items: Vec<Obj>) -> Result<(), PickleError> {
        match self.top()? {
            Obj::List(list) => {
                list.borrow_mut().extend(items);
                Ok(())
            }
            _ => Err(self.error("APPEND to something that is not a list")),
        }
    }

    fn set_items(&mut self, items: Vec<Obj>) -> Result<(), PickleError> {
        if items.len() % 2 != 0 {
            return Err(self.error("SETITEMS with a key and no value"));
        }
        match self.top()? {
            Obj::Dict(dict) => {
                let mut dict = dict.borrow_mut();
                let mut it = items.into_iter();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    dict.push((k, v));
                }
                Ok(())
            }
            _ => Err(self.error("SETITEM to something that is not a dict")),
        }
    }

    fn run(&mut self) -> Result<Obj, PickleError> {
        loop {
            self.at = self.pos;
            let op = self.take(1).map_err(|_| PickleError {
                offset: self.data.len(),
                message: "the data ends before the pickle's STOP opcode (a truncated file?)".into(),
            })?[0];
            match op {
                PROTO => {
                    let version = self.byte()?;
                    if version > 5 {
                        return Err(self.error(format!("unknown pickle protocol {version}")));
                    }
                }
                FRAME => {
                    self.u64()?;
                }
                STOP => {
                    if !self.marks.is_empty() {
                        return Err(self.error("STOP with an unclosed MARK"));
                    }
                    let result = self.pop()?;
                    if !self.stack.is_empty() {
                        return Err(self.error("STOP with more than one value on the stack"));
                    }
                    return Ok(result);
                }
                NONE => self.push(Obj::Scalar(Value::None)),
                NEWTRUE => self.push(Obj::Scalar(Value::Bool(true))),
                NEWFALSE => self.push(Obj::Scalar(Value::Bool(false))),
                BININT => {
                    let v = self.u32()? as i32;
                    self.push(Obj::Scalar(Value::Int(i64::from(v))));
                }
                BININT1 => {
                    let v = self.byte()?;
                    self.push(Obj::Scalar(Value::Int(i64::from(v))));
                }
                BININT2 => {
                    let b = self.take(2)?;
                    let v = u16::from_le_bytes([b[0], b[1]]);
                    self.push(Obj::Scalar(Value::Int(i64::from(v))));
                }
                LONG1 | LONG4 => {
                    let n = if op == LONG1 {
                        usize::from(self.byte()?)
                    } else {
                        self.u32()? as usize
                    };
                    if n > 8 {
                        return Err(
                            self.error(format!("an int of {n} bytes (at most 8 are supported)"))
                        );
                    }
                    let bytes = self.take(n)?;
                    let mut wide = if bytes.last().is_some_and(|&b| b & 0x80 != 0) {
                        [0xff; 8]
                    } else {
                        [0; 8]
                    };
                    wide[..n].copy_from_slice(bytes);
                    self.push(Obj::Scalar(Value::Int(i64::from_le_bytes(wide))));
                }
                INT | LONG => {
                    let line = self.line()?;
                    let text = line.trim_end_matches('L');
                    let value = match text {
                        "00" => Value::Bool(false),
                        "01" => Value::Bool(true),
                        _ => Value::Int(
                            text.parse()
                                .map_err(|_| self.error(format!("{text:?} is not an int")))?,
                        ),
                    };
                    self.push(Obj::Scalar(value));
                }
                BINFLOAT => {
                    let b = self.take(8)?;
                    let v = f64::from_be_bytes(b.try_into().unwrap_or_default());
                    self.push(Obj::Scalar(Value::Float(v)));
                }
                FLOAT => {
                    let line = self.line()?;
                    let v: f64 = line
                        .parse()
                        .map_err(|_| self.error(format!("{line:?} is not a float")))?;
                    self.push(Obj::Scalar(Value::Float(v)));
                }
                BINUNICODE => {
                    let n = self.u32()? as usize;
                    let s = self.text(n)?;
                    self.push(s);
                }
                SHORT_BINUNICODE => {
                    let n = usize::from(self.byte()?);
                    let s = self.text(n)?;
                    self.push(s);
                }
                BINUNICODE8 => {
                    let n = usize::try_from(self.u64()?).unwrap_or(usize::MAX);
                    let s = self.text(n)?;
                    self.push(s);
                }
                EMPTY_DICT => self.push(Obj::Dict(Rc::default())),
                EMPTY_LIST => self.push(Obj::List(Rc::default())),
                EMPTY_TUPLE => self.push(Obj::Tuple(Rc::default())),
                MARK => {
                    if self.marks.len() >= MAX_DEPTH * 4 {
                        return Err(self.error("MARKs nest too deep"));
                    }
                    self.marks.push(self.stack.len());
                }
                APPEND => {
                    let v = self.pop()?;
                    self.append(vec![v])?;
                }
                APPENDS => {
                    let items = self.pop_mark()?;
                    self.append(items)?;
                }
                SETITEM => {
                    let v = self.pop()?;
                    let k = self.pop()?;
                    self.set_items(vec![k, v])?;
                }
                SETITEMS => {
                    let items = self.pop_mark()?;
                    self.set_items(items)?;
                }
                LIST => {
                    let items = self.pop_mark()?;
                    self.push(Obj::List(Rc::new(RefCell::new(items))));
                }
                DICT => {
                    let items = self.pop_mark()?;
                    self.push(Obj::Dict(Rc::default()));
                    self.set_items(items)?;
                }
                TUPLE => {
                    let items = self.pop_mark()?;
                    self.push(Obj::Tuple(Rc::new(items)));
                }
                TUPLE1 | TUPLE2 | TUPLE3 => {
                    let n = usize::from(op - TUPLE1 + 1);
                    let mut items = Vec::with_capacity(n);
                    for _ in 0..n {
                        items.push(self.pop()?);
                    }
                    items.reverse();
                    self.push(Obj::Tuple(Rc::new(items)));
                }
                BINPUT => {
                    let i = self.byte()?;
                    self.memo_put(u64::from(i))?;
                }
                LONG_BINPUT => {
                    let i = self.u32()?;
                    self.memo_put(u64::from(i))?;
                }
                MEMOIZE => {
                    let i = self.memo.len() as u64;
                    self.memo_put(i)?;
                }
                PUT => {
                    let line = self.line()?;
                    let i = line
                        .parse()
                        .map_err(|_| self.error(format!("{line:?} is not a memo index")))?;
                    self.memo_put(i)?;
                }
                BINGET => {
                    let i = self.byte()?;
                    self.memo_get(u64::from(i))?;
                }
                LONG_BINGET => {
                    let i = self.u32()?;
                    self.memo_get(u64::from(i))?;
                }
                GET => {
                    let line = self.line()?;
                    let i = line
                        .parse()
                        .map_err(|_| self.error(format!("{line:?} is not a memo index")))?;
                    self.memo_get(i)?;
                }
                POP => {
                    self.pop()?;
                }
                POP_MARK => {
                    self.pop_mark()?;
                }
                DUP => {
                    let top = self.top()?.clone();
                    self.push(top);
                }
                other => return Err(self.error(refused(other))),
            }
        }
    }
}

/// Why an opcode is not read.
fn refused(op: u8) -> String {
    let name = match op {
        b'c' => "GLOBAL",
        0x93 => "STACK_GLOBAL",
        b'R' => "REDUCE",
        b'b' => "BUILD",
        b'i' => "INST",
        b'o' => "OBJ",
        0x81 => "NEWOBJ",
        0x92 => "NEWOBJ_EX",
        b'P' => "PERSID",
        b'Q' => "BINPERSID",
        0x82..=0x84 => "EXT",
        b'B' | b'C' | 0x8e | 0x96 | 0x97 | 0x98 => "bytes",
        _ => {
            return format!(
                "opcode {op:#04x} is not a pickle opcode (corrupt data, or not a pickle)"
            )
        }
    };
    format!(
        "opcode {op:#04x} ({name}) is not allowed: a memory snapshot holds only dicts, lists, tuples, strings, numbers, bools and None"
    )
}

/// Copies a machine object out into a [`Value`], bounding depth and total size.
fn to_value(obj: &Obj, depth: usize, budget: &mut usize) -> Result<Value, String> {
    if depth > MAX_DEPTH {
        return Err(format!(
            "containers nest more than {MAX_DEPTH} deep (a cycle?)"
        ));
    }
    *budget = budget.checked_sub(1).ok_or_else(|| {
        "too many values once shared containers are copied out (lists that share each other?)"
            .to_owned()
    })?;
    Ok(match obj {
        Obj::Scalar(v) => v.clone(),
        Obj::List(items) => Value::List(
            items
                .borrow()
                .iter()
                .map(|o| to_value(o, depth + 1, budget))
                .collect::<Result<_, _>>()?,
        ),
        Obj::Tuple(items) => Value::Tuple(
            items
                .iter()
                .map(|o| to_value(o, depth + 1, budget))
                .collect::<Result<_, _>>()?,
        ),
        Obj::Dict(items) => Value::Dict(
            items
                .borrow()
                .iter()
                .map(|(k, v)| {
                    Ok((
                        to_value(k, depth + 1, budget)?,
                        to_value(v, depth + 1, budget)?,
                    ))
                })
                .collect::<Result<_, String>>()?,
        ),
    })
}

/// Reads a pickle of data (see the module docs).
///
/// # Errors
/// [`PickleError`] for a truncated or corrupt pickle, or one that names classes or calls.
pub fn from_pickle(data: &[u8]) -> Result<Value, PickleError> {
    let mut machine = Machine {
        data,
        pos: 0,
        at: 0,
        stack: Vec::new(),
        marks: Vec::new(),
        memo: HashMap::new(),
    };
    let obj = machine.run()?;
    let end = machine.pos;
    let mut budget = data.len().saturating_mul(VALUES_PER_BYTE).max(MIN_VALUES);
    to_value(&obj, 0, &mut budget).map_err(|message| PickleError {
        offset: end,
        message,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Value {
        Value::dict([
            (
                "segments",
                Value::List(vec![Value::dict([
                    ("address", Value::Int(0x7f00_0000_0000)),
                    ("neg", Value::Int(-5)),
                    ("big", Value::Int(i64::MAX)),
                    ("small_neg", Value::Int(-129)),
                    ("pool", Value::Tuple(vec![Value::Int(0), Value::Int(70000)])),
                    ("ok", Value::Bool(true)),
                    ("none", Value::None),
                    ("f", Value::Float(1.5)),
                    ("name", Value::from("ünïcode")),
                ])]),
            ),
            ("device_traces", Value::List(vec![Value::List(vec![])])),
        ])
    }

    #[test]
    fn round_trips() {
        let v = sample();
        assert_eq!(from_pickle(&to_pickle(&v)).unwrap(), v);
        for i in [
            0,
            1,
            255,
            256,
            65535,
            65536,
            -1,
            -128,
            -129,
            i32::MIN as i64,
            i32::MAX as i64 + 1,
            i64::MIN,
            i64::MAX,
        ] {
            assert_eq!(
                from_pickle(&to_pickle(&Value::Int(i))).unwrap(),
                Value::Int(i),
                "{i}"
            );
        }
    }

    #[test]
    fn memoized_strings_and_shared_lists_read_back() {
        let mut p = Pickler::new();
        p.list_with(3, |p, _| {
            p.shared_list_with(42, 2, |p, j| p.str(if j == 0 { "file.py" } else { "name" }));
        });
        let v = from_pickle(&p.finish()).unwrap();
        let inner = Value::List(vec![Value::from("file.py"), Value::from("name")]);
        assert_eq!(v, Value::List(vec![inner.clone(), inner.clone(), inner]));
    }

    #[test]
    fn python_protocol_4_with_frames_and_memoize() {
        // pickle.dumps({'a': [1, 'x', 'x'], 'b': (True, None)}, protocol=4) with the second 'x' a memo
        // reference, as CPython writes it.
        let data = b"\x80\x04\x95\x1d\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01a\x94]\x94(K\x01\x8c\x01x\x94h\x03e\x8c\x01b\x94\x88N\x86\x94u.";
        let v = from_pickle(data).unwrap();
        assert_eq!(
            v,
            Value::dict([
                (
                    "a",
                    Value::List(vec![Value::Int(1), Value::from("x"), Value::from("x")])
                ),
                ("b", Value::Tuple(vec![Value::Bool(true), Value::None])),
            ])
        );
    }

    #[test]
    fn every_truncation_is_an_error_never_a_panic() {
        let data = to_pickle(&sample());
        for n in 0..data.len() {
            let e = from_pickle(&data[..n]).unwrap_err();
            assert!(
                e.message.contains("ends")
                    || e.message.contains("stack")
                    || e.message.contains("MARK"),
                "{n}: {e}"
            );
        }
    }

    #[test]
    fn every_single_bit_flip_is_an_error_or_data() {
        let data = to_pickle(&sample());
        for i in 0..data.len() {
            for bit in 0..8 {
                let mut bad = data.clone();
                bad[i] ^= 1 << bit;
                // Either a clean error or some (other) data: never a panic or a hang.
                let _ = from_pickle(&bad);
            }
        }
    }

    #[test]
    fn code_is_refused() {
        // pickle.dumps(os.system) -> GLOBAL 'posix system'
        let e = from_pickle(b"\x80\x02cposix\nsystem\nq\x00.").unwrap_err();
        assert_eq!(e.offset, 2);
        assert!(
            e.message.contains("GLOBAL") && e.message.contains("not allowed"),
            "{e}"
        );
        let e = from_pickle(b"\x80\x02N)R.").unwrap_err();
        assert!(e.message.contains("REDUCE"), "{e}");
    }

    #[test]
    fn cycles_and_exponential_sharing_are_bounded() {
        // A list that contains itself: ] q0 h0 a .
        let e = from_pickle(b"\x80\x02]q\x00h\x00a.").unwrap_err();
        assert!(e.message.contains("deep"), "{e}");
        // 40 levels of a list holding its predecessor twice: 2^40 values once copied out.
        let mut data = vec![PROTO, 2, EMPTY_LIST];
        for _ in 0..40 {
            data.extend_from_slice(&[DUP, TUPLE2]);
        }
        data.push(STOP);
        let e = from_pickle(&data).unwrap_err();
        assert!(e.message.contains("values"), "{e}");
    }

    #[test]
    fn malformed_structure_is_reported() {
        assert!(from_pickle(b"\x80\x02a.")
            .unwrap_err()
            .message
            .contains("stack"));
        assert!(from_pickle(b"\x80\x02Ne.")
            .unwrap_err()
            .message
            .contains("MARK"));
        assert!(from_pickle(b"\x80\x02NN.")
            .unwrap_err()
            .message
            .contains("more than one"));
        assert!(from_pickle(b"\x80\x02h\x05.")
            .unwrap_err()
            .message
            .contains("memo"));
        assert!(from_pickle(b"\x80\x09N.")
            .unwrap_err()
            .message
            .contains("protocol"));
        assert!(from_pickle(b"\x80\x02X\xff\xff\xff\xffab.")
            .unwrap_err()
            .message
            .contains("ends early"));
        assert!(from_pickle(b"\x80\x02X\x02\x00\x00\x00\xff\xfe.")
            .unwrap_err()
            .message
            .contains("UTF-8"));
        assert!(from_pickle(b"{\"json\": 1}").is_err());
    }
}
