//! Parsing RMM memory-event logs (the CSV that `logging_resource_adaptor` writes, RMM's and ours).
//!
//! The format, one header line and one line per event:
//!
//! ```text
//! Thread,Time,Action,Pointer,Size,Stream
//! 140202634880768,14:21:19.998533,allocate,0x7f5c84000000,1048576,0x0
//! 140202634880768,14:21:20.001207,free,0x7f5c84000000,1048576,0x0
//! 140202634880768,14:21:20.001230,allocate failure,(nil),85899345920,0x5610a1b2c3d0
//! ```
//!
//! - `Thread`: the OS thread id, decimal (RMM's `%t`); `0x`-prefixed hex is accepted too.
//! - `Time`: `HH:MM:SS.ffffff`, the wall clock of the event (fractions of 0 to 9 digits). Optional:
//!   a log without the column replays the same, and plots against the event index.
//! - `Action`: `allocate`, `free` or `allocate failure`.
//! - `Pointer`: hex (`0x…`, or bare hex digits); `(nil)` (glibc's `%p` of null), `nullptr` or `0`
//!   for null.
//! - `Size`: bytes, decimal.
//! - `Stream`: the stream handle, hex like `Pointer` (`0`/`0x0` is the default stream).
//!
//! Columns are found by name (case-insensitive, any order, extra columns ignored), fields are
//! trimmed and blank lines skipped. Anything else is a [`ParseError`] naming the line, the column
//! and the offending text; parsing never panics.

use std::fmt;
use std::io::Read;
use std::path::{Path, PathBuf};

use serde::Serialize;

/// What a log line records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// A successful allocation (`allocate`).
    Allocate,
    /// A deallocation (`free`).
    Free,
    /// An allocation that failed when the log was recorded (`allocate failure`).
    AllocateFailure,
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Action::Allocate => "allocate",
            Action::Free => "free",
            Action::AllocateFailure => "allocate failure",
        })
    }
}

/// One line of a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Event {
    /// The line of the log it came from (1-based; the header is line 1).
    pub line: u64,
    /// The recording thread's id.
    pub thread: u64,
    /// Microseconds since midnight of the wall clock, or `None` when the log has no `Time` column.
    pub time_us: Option<u64>,
    /// What happened.
    pub action: Action,
    /// The pointer allocated or freed (0 for null).
    pub pointer: u64,
    /// The size in bytes.
    pub size: usize,
    /// The raw stream handle it was ordered on.
    pub stream: u64,
}

/// A log that could not be parsed: where and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}: {message}")]
pub struct ParseError {
    /// The 1-based line number (the header is line 1).
    pub line: u64,
    /// What is wrong with it.
    pub message: String,
}

impl ParseError {
    fn new(line: u64, message: impl Into<String>) -> Self {
        Self {
            line,
            message: message.into(),
        }
    }
}

/// A log file that could not be read or parsed.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The file could not be opened or read.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The log's path.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not a valid log.
    #[error("{}:{}: {}", path.display(), error.line, error.message)]
    Parse {
        /// The log's path.
        path: PathBuf,
        /// Where and why.
        #[source]
        error: ParseError,
    },
}

/// The header RMM writes.
pub const HEADER: &str = "Thread,Time,Action,Pointer,Size,Stream";

/// Reads and parses the log at `path`.
///
/// # Errors
/// [`LogError::Io`] when the file cannot be read, [`LogError::Parse`] for the first malformed line.
pub fn read_log(path: &Path) -> Result<Vec<Event>, LogError> {
    let data = std::fs::read(path).map_err(|source| LogError::Io {
        path: path.into(),
        source,
    })?;
    parse_bytes(&data).map_err(|error| LogError::Parse {
        path: path.into(),
        error,
    })
}

/// Parses a whole log.
///
/// ```
/// use rmm_replay::log::{parse, Action};
/// let log = "Thread,Time,Action,Pointer,Size,Stream\n\
///            2342727,15:47:02.841961,allocate,0x10012400000,1048576,0\n\
///            2342727,15:47:02.841977,free,0x10012400000,1048576,0\n";
/// let events = parse(log.as_bytes())?;
/// assert_eq!(events[1].action, Action::Free);
/// assert_eq!(events[1].line, 3);
/// assert_eq!(events[0].pointer, 0x10012400000);
/// # Ok::<(), rmm_replay::log::ParseError>(())
/// ```
///
/// # Errors
/// The first malformed line, as a [`ParseError`]; a read failure has line 0.
pub fn parse<R: Read>(mut input: R) -> Result<Vec<Event>, ParseError> {
    let mut data = Vec::new();
    input
        .read_to_end(&mut data)
        .map_err(|e| ParseError::new(0, format!("read error: {e}")))?;
    parse_bytes(&data)
}

/// Parses a whole log held in memory.
///
/// # Errors
/// The first malformed line, as a [`ParseError`].
pub fn parse_bytes(data: &[u8]) -> Result<Vec<Event>, ParseError> {
    let mut lines = LineCounter {
        data,
        pos: 0,
        line: 1,
    };
    let mut reader = csv::ReaderBuilder::new()
        .has_headers(false)
        .flexible(true)
        .trim(csv::Trim::All)
        .from_reader(data);
    let mut records = reader.records();
    let header = match records.next() {
        None => {
            return Err(ParseError::new(
                1,
                format!("the log is empty: expected the header `{HEADER}`"),
            ))
        }
        Some(record) => record.map_err(|e| csv_error(e, &mut lines))?,
    };
    let columns = Columns::find(&header, lines.line_of(header.position()))?;
    let mut events = Vec::new();
    for record in records {
        let record = record.map_err(|e| csv_error(e, &mut lines))?;
        let line = lines.line_of(record.position());
        events.push(columns.event(&record, line)?);
    }
    Ok(events)
}

fn csv_error(error: csv::Error, lines: &mut LineCounter<'_>) -> ParseError {
    let line = lines.line_of(error.position());
    let message = match error.kind() {
        csv::ErrorKind::Utf8 { .. } => "not valid UTF-8 text".to_string(),
        csv::ErrorKind::Io(e) => format!("read error: {e}"),
        _ => error.to_string(),
    };
    ParseError::new(line, message)
}

/// Line numbers from the byte offsets the csv reader gives (its own line numbers, and the start
/// it reports for a record after blank lines, are off; its byte offsets are those of the end of the
/// previous record). Queries must come in increasing order.
struct LineCounter<'a> {
    data: &'a [u8],
    /// A byte offset already counted, at the start of line `line`.
    pos: usize,
    line: u64,
}

impl LineCounter<'_> {
    /// The line of the record whose reported position is `position`: blank lines before it are
    /// skipped. A line ends at `\n`, `\r\n` or a lone `\r`, as for the csv reader.
    fn line_of(&mut self, position: Option<&csv::Position>) -> u64 {
        let Some(target) = position.and_then(|p| usize::try_from(p.byte()).ok()) else {
            return self.line;
        };
        let target = target.clamp(self.pos, self.data.len());
        self.advance_to(target);
        // Skip the line ends that precede the record's first character.
        while let Some(&b) = self.data.get(self.pos) {
            if b != b'\n' && b != b'\r' {
                break;
            }
            self.advance_to(self.pos + 1);
        }
        self.line
    }

    fn advance_to(&mut self, target: usize) {
        for i in self.pos..target {
            let ends_line = match self.data[i] {
                b'\n' => true,
                b'\r' => self.data.get(i + 1) != Some(&b'\n'),
                _ => false,
            };
            if ends_line {
                self.line += 1;
            }
        }
        self.pos = target;
    }
}

/// Where each column is.
#[derive(Debug)]
struct Columns {
    thread: usize,
    time: Option<usize>,
    action: usize,
    pointer: usize,
    size: usize,
    stream: usize,
    width: usize,
}

impl Columns {
    fn find(header: &csv::StringRecord, line: u64) -> Result<Self, ParseError> {
        let position = |name: &str| header.iter().position(|h| h.eq_ignore_ascii_case(name));
        let required = |name: &str| {
            position(name).ok_or_else(|| {
                let found = header.iter().collect::<Vec<_>>().join(",");
                ParseError::new(
                    line,
                    format!(
                        "the header has no `{name}` column: expected `{HEADER}`, found `{found}`"
                    ),
                )
            })
        };
        Ok(Self {
            thread: required("Thread")?,
            time: position("Time"),
            action: required("Action")?,
            pointer: required("Pointer")?,
            size: required("Size")?,
            stream: required("Stream")?,
            width: header.len(),
        })
    }

    fn event(&self, record: &csv::StringRecord, line: u64) -> Result<Event, ParseError> {
        if record.len() != self.width {
            return Err(ParseError::new(
                line,
                format!(
                    "expected {} fields like the header, found {}",
                    self.width,
                    record.len()
                ),
            ));
        }
        let field = |index: usize, name: &str, parse: fn(&str) -> Result<u64, String>| {
            let text = record.get(index).unwrap_or("");
            parse(text).map_err(|why| ParseError::new(line, format!("bad {name} `{text}`: {why}")))
        };
        let action_text = record.get(self.action).unwrap_or("");
        let action = parse_action(action_text)
            .map_err(|why| ParseError::new(line, format!("bad Action `{action_text}`: {why}")))?;
        let size = field(self.size, "Size", parse_size)?;
        Ok(Event {
            line,
            thread: field(self.thread, "Thread", parse_thread)?,
            time_us: self
                .time
                .map(|t| field(t, "Time", parse_time))
                .transpose()?,
            action,
            pointer: field(self.pointer, "Pointer", parse_hex)?,
            size: usize::try_from(size).map_err(|_| {
                ParseError::new(
                    line,
                    format!("bad Size `{size}`: too large for this machine"),
                )
            })?,
            stream: field(self.stream, "Stream", parse_hex)?,
        })
    }
}

/// Parses an `Action` field.
///
/// # Errors
/// A message for anything but `allocate`, `free` or `allocate failure`.
pub fn parse_action(text: &str) -> Result<Action, String> {
    match text {
        "allocate" => Ok(Action::Allocate),
        "free" => Ok(Action::Free),
        "allocate failure" => Ok(Action::AllocateFailure),
        _ => Err("expected `allocate`, `free` or `allocate failure`".into()),
    }
}

/// Parses a `Thread` field: decimal, or hex with a `0x` prefix.
///
/// # Errors
/// A message for anything else.
pub fn parse_thread(text: &str) -> Result<u64, String> {
    if let Some(hex) = strip_hex_prefix(text) {
        return hex_digits(hex);
    }
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a decimal thread id (or 0x-prefixed hex)".into());
    }
    text.parse().map_err(|_| "does not fit in 64 bits".into())
}

/// Parses a `Pointer` or `Stream` field: hex with or without `0x`; `(nil)`, `nullptr` and `0` are 0.
///
/// # Errors
/// A message for anything else.
pub fn parse_hex(text: &str) -> Result<u64, String> {
    if text == "(nil)" || text == "nullptr" {
        return Ok(0);
    }
    hex_digits(strip_hex_prefix(text).unwrap_or(text))
}

fn strip_hex_prefix(text: &str) -> Option<&str> {
    text.strip_prefix("0x").or_else(|| text.strip_prefix("0X"))
}

fn hex_digits(digits: &str) -> Result<u64, String> {
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err("expected a hex number like 0x7f5c84000000 (or `(nil)`)".into());
    }
    u64::from_str_radix(digits, 16).map_err(|_| "does not fit in 64 bits".into())
}

/// Parses a `Size` field: decimal bytes.
///
/// # Errors
/// A message for anything else.
pub fn parse_size(text: &str) -> Result<u64, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err("expected a decimal number of bytes".into());
    }
    text.parse().map_err(|_| "does not fit in 64 bits".into())
}

/// Parses a `Time` field, `HH:MM:SS` with an optional fraction of up to 9 digits, into
/// microseconds since midnight.
///
/// ```
/// assert_eq!(rmm_replay::log::parse_time("01:02:03.000004"), Ok(3_723_000_004));
/// assert_eq!(rmm_replay::log::parse_time("23:59:59.5"), Ok(86_399_500_000));
/// ```
///
/// # Errors
/// A message for anything else, or a field out of range.
pub fn parse_time(text: &str) -> Result<u64, String> {
    const EXPECTED: &str = "expected HH:MM:SS.ffffff";
    let (clock, fraction) = text.split_once('.').unwrap_or((text, ""));
    let mut parts = clock.split(':');
    let mut next = |limit: u64| -> Result<u64, String> {
        let part = parts.next().ok_or(EXPECTED)?;
        if part.len() != 2 || !part.bytes().all(|b| b.is_ascii_digit()) {
            return Err(EXPECTED.into());
        }
        let value: u64 = part.parse().map_err(|_| EXPECTED)?;
        if value >= limit {
            return Err(format!("{EXPECTED} ({value} is out of range)"));
        }
        Ok(value)
    };
    // 61 seconds: a leap second is a valid wall-clock reading.
    let (hours, minutes, seconds) = (next(24)?, next(60)?, next(61)?);
    if parts.next().is_some() || (text.contains('.') && fraction.is_empty()) {
        return Err(EXPECTED.into());
    }
    if fraction.len() > 9 || !fraction.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("{EXPECTED} (the fraction has 1 to 9 digits)"));
    }
    // Pad or cut the fraction to microseconds.
    let micros = fraction
        .bytes()
        .chain(std::iter::repeat(b'0'))
        .take(6)
        .fold(0u64, |acc, b| acc * 10 + u64::from(b - b'0'));
    Ok(((hours * 60 + minutes) * 60 + seconds) * 1_000_000 + micros)
}

/// The events' times in seconds since the first event, or `None` when the log has no `Time`
/// column. A clock that jumps back by more than 12 hours is taken to have passed midnight.
pub fn seconds_since_start(events: &[Event]) -> Option<Vec<f64>> {
    const DAY_US: u64 = 24 * 3600 * 1_000_000;
    let first = events.first()?.time_us?;
    let (mut previous, mut days) = (first, 0u64);
    events
        .iter()
        .map(|e| {
            let now = e.time_us?;
            if now + DAY_US / 2 < previous {
                days += 1;
            }
            previous = now;
            let absolute = now + days * DAY_US;
            Some(absolute.saturating_sub(first) as f64 / 1e6)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines in RMM's format (`%t,%H:%M:%S.%f,%v`, pointers printed with `%p`, so null is `(nil)`).
    /// Lines 2 and 5 are quoted from spark-rapids' documentation of RMM's debug log, lines 6 and 7
    /// from RMM's replay guide (a stream printed as a bare `0`); the others follow the same format
    /// for a second thread, a non-default stream and a recorded failure.
    const RMM_SAMPLE: &str = "\
Thread,Time,Action,Pointer,Size,Stream
1979932,14:21:19.998533,allocate,0x30a000000,256,0x2
1979932,14:21:20.000117,allocate,0x7f3b2c000000,8388608,0x55d1c7a4e8f0
1980043,14:21:20.000201,allocate failure,(nil),85899345920,0x55d1c7a4e8f0
1980043,14:21:32.661875,free,0x30a000000,256,0x2
2342727,15:47:02.841961,allocate,0x10012400000,1048576,0
2342727,15:47:02.841977,free,0x10012400000,1048576,0
1979932,15:47:02.841990,free,0x7f3b2c000000,8388608,0x55d1c7a4e8f0
";

    fn err(log: &str) -> ParseError {
        parse(log.as_bytes()).unwrap_err()
    }

    #[test]
    fn rmm_logs_parse_with_every_field() {
        let events = parse(RMM_SAMPLE.as_bytes()).unwrap();
        assert_eq!(events.len(), 7);
        assert_eq!(
            events[1],
            Event {
                line: 3,
                thread: 1_979_932,
                time_us: Some((14 * 3600 + 21 * 60 + 20) * 1_000_000 + 117),
                action: Action::Allocate,
                pointer: 0x7f3b_2c00_0000,
                size: 8 << 20,
                stream: 0x55d1_c7a4_e8f0,
            }
        );
        assert_eq!(events[0].stream, 2, "cudaStreamPerThread");
        assert_eq!(events[2].action, Action::AllocateFailure);
        assert_eq!(events[2].pointer, 0, "(nil) is null");
        assert_eq!(events[2].size, 80 << 30);
        assert_eq!((events[5].stream, events[5].pointer), (0, 0x100_1240_0000));
        assert_eq!(events[6].line, 8);
        let seconds = seconds_since_start(&events).unwrap();
        assert!((seconds[6] - 5_142.843_457).abs() < 1e-6, "{}", seconds[6]);
    }

    #[test]
    fn hex_thread_ids_crlf_blank_lines_spaces_and_column_order_are_accepted() {
        let log = "stream , size,pointer,ACTION,thread\r\n\r\n 0 , 100 , 0x10 , allocate , 0x1F \r\n\n0x0,100,10,free,31\r\n";
        let events = parse(log.as_bytes()).unwrap();
        assert_eq!(events.len(), 2);
        assert_eq!((events[0].thread, events[1].thread), (31, 31));
        assert_eq!((events[0].pointer, events[1].pointer), (0x10, 0x10));
        assert_eq!(events[0].time_us, None, "Time is optional");
        assert_eq!(events[0].line, 3);
        assert_eq!(events[1].line, 5);
        assert_eq!(seconds_since_start(&events), None);
    }

    #[test]
    fn line_numbers_count_blank_lines_and_every_line_ending() {
        let row = "1,00:00:00.0,allocate,0x10,1,0x0";
        for (log, lines) in [
            (
                format!("\n\nThread,Time,Action,Pointer,Size,Stream\n{row}\n\n\n{row}\n"),
                [4, 7],
            ),
            (
                format!("Thread,Time,Action,Pointer,Size,Stream\r\n\r\n{row}\r\n{row}"),
                [3, 4],
            ),
            (
                format!("Thread,Time,Action,Pointer,Size,Stream\r{row}\r\r{row}\r"),
                [2, 4],
            ),
        ] {
            let events = parse(log.as_bytes()).unwrap();
            assert_eq!([events[0].line, events[1].line], lines, "{log:?}");
            let bad = log
                .replacen("0x10,1,", "0x10,x,", 2)
                .replacen("0x10,x,", "0x10,1,", 1);
            assert_eq!(parse(bad.as_bytes()).unwrap_err().line, lines[1], "{bad:?}");
        }
    }

    #[test]
    fn null_pointers_in_every_spelling() {
        for null in ["(nil)", "nullptr", "0", "0x0"] {
            assert_eq!(parse_hex(null), Ok(0), "{null}");
        }
        assert_eq!(parse_hex("7F5c84000000"), Ok(0x7f5c_8400_0000));
    }

    #[test]
    fn each_malformed_field_names_its_line_and_column() {
        let head = "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.0,allocate,0x10,1,0x0\n";
        let cases = [
            ("x1,00:00:00.0,free,0x10,1,0x0", "bad Thread `x1`"),
            ("-1,00:00:00.0,free,0x10,1,0x0", "bad Thread `-1`"),
            ("1,25:00:00.0,free,0x10,1,0x0", "bad Time `25:00:00.0`"),
            ("1,1634567890.1,free,0x10,1,0x0", "bad Time `1634567890.1`"),
            ("1,00:00:00.,free,0x10,1,0x0", "bad Time `00:00:00.`"),
            (
                "1,00:00:00.0,deallocate,0x10,1,0x0",
                "bad Action `deallocate`",
            ),
            ("1,00:00:00.0,free,0xZZ,1,0x0", "bad Pointer `0xZZ`"),
            ("1,00:00:00.0,free,,1,0x0", "bad Pointer ``"),
            ("1,00:00:00.0,free,0x10,1.5,0x0", "bad Size `1.5`"),
            (
                "1,00:00:00.0,free,0x10,99999999999999999999,0x0",
                "bad Size `99999999999999999999`",
            ),
            ("1,00:00:00.0,free,0x10,1,stream", "bad Stream `stream`"),
            (
                "1,00:00:00.0,free,0x10,1",
                "expected 6 fields like the header, found 5",
            ),
            (
                "1,00:00:00.0,free,0x10,1,0x0,extra",
                "expected 6 fields like the header, found 7",
            ),
        ];
        for (line, expected) in cases {
            let e = err(&format!("{head}{line}\n"));
            assert_eq!(e.line, 3, "{line}");
            assert!(e.message.starts_with(expected), "{line}: {}", e.message);
        }
    }

    #[test]
    fn a_truncated_last_line_is_an_error_not_a_panic() {
        let e = err(
            "Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.0,allocate,0x10,1,0x0\n1,00:00:0",
        );
        assert_eq!(e.line, 3);
    }

    #[test]
    fn headers_are_checked() {
        let e = err("");
        assert_eq!(e.line, 1);
        assert!(e.message.contains("empty"));
        let e = err("1,00:00:00.0,allocate,0x10,1,0x0\n");
        assert_eq!(e.line, 1);
        assert!(e.message.contains("no `Thread` column"), "{}", e.message);
        let e = err("Thread,Time,Action,Pointer,Size\n");
        assert!(e.message.contains("no `Stream` column"), "{}", e.message);
    }

    #[test]
    fn invalid_utf8_is_reported_with_its_line() {
        let mut log =
            b"Thread,Time,Action,Pointer,Size,Stream\n1,00:00:00.0,allocate,0x10,1,0x0\n".to_vec();
        log.extend_from_slice(b"1,00:00:00.0,free,0x\xff,1,0x0\n");
        let e = parse(log.as_slice()).unwrap_err();
        assert_eq!((e.line, e.message.as_str()), (3, "not valid UTF-8 text"));
    }

    #[test]
    fn times_parse_and_wrap_at_midnight() {
        assert_eq!(parse_time("00:00:00"), Ok(0));
        assert_eq!(parse_time("00:00:01.123456789"), Ok(1_123_456));
        assert_eq!(parse_time("00:00:60.0"), Ok(60_000_000), "leap second");
        for bad in [
            "0:00:00",
            "00:60:00",
            "00:00:00:00",
            "00:00",
            "00:00:00.1234567890",
            "aa:bb:cc",
        ] {
            assert!(parse_time(bad).is_err(), "{bad}");
        }
        let log = "Thread,Time,Action,Pointer,Size,Stream\n\
                   1,23:59:59.5,allocate,0x10,1,0\n1,23:59:59.75,free,0x10,1,0\n1,00:00:00.5,allocate,0x10,1,0\n";
        let events = parse(log.as_bytes()).unwrap();
        assert_eq!(seconds_since_start(&events), Some(vec![0.0, 0.25, 1.0]));
    }

    #[test]
    fn read_errors_name_the_file() {
        let e = read_log(Path::new("/definitely/not/here.csv")).unwrap_err();
        assert!(matches!(e, LogError::Io { .. }));
        assert!(
            e.to_string()
                .starts_with("cannot read /definitely/not/here.csv"),
            "{e}"
        );
        let dir = std::env::temp_dir();
        assert!(
            matches!(read_log(&dir), Err(LogError::Io { .. })),
            "a directory is unreadable"
        );
    }
}
