//! Import and export of Jepsen's Kafka-workload histories (EDN).
//!
//! Jepsen writes one op per line (`history.edn`) or a vector of ops:
//!
//! ```text
//! {:index 0, :time 1, :type :invoke, :process 0, :f :send, :value [[:send 1 907]]}
//! {:index 1, :time 2, :type :ok, :process 0, :f :send, :value [[:send 1 [16 907]]]}
//! {:index 2, :time 3, :type :ok, :process 2, :f :poll, :value [[:poll {1 [[16 903] [17 907]]}]]}
//! {:index 3, :time 4, :type :info, :process :nemesis, :f :start-partition, :value {"n1" #{"n2"}}}
//! ```
//!
//! Jepsen's keys are integers; Tidewater's are `topic/partition`. [`KeyMapping`] converts
//! between them: with `partitions` partitions per topic, Jepsen key `k` is
//! `{prefix}{k / partitions}/{k % partitions}` (default: prefix `t`, one partition per topic,
//! so `k` <-> `t{k}/0`). Other fields map by name (`:high-watermarks` <-> `high_watermarks`,
//! `:log-start-offsets`, `:error`, `:node`, `:final?`, `:txn-end`). See `docs/history.md`.
//!
//! The reader is a small, complete-enough EDN parser: maps, vectors, lists, sets, keywords,
//! symbols, strings, characters, integers, floats, `nil`, booleans, comments, `#_` discards
//! and tagged literals (Jepsen's `#jepsen.history.Op{...}` records read as maps). Nesting is
//! bounded so hostile input cannot overflow the stack.

use crate::history::{Op, OpType, Process};
use serde_json::{Map, Number, Value};
use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

/// Nesting deeper than this is rejected.
const DEPTH_MAX: usize = 128;

/// An EDN value.
#[derive(Debug, Clone, PartialEq)]
pub enum Edn {
    /// `nil`.
    Nil,
    /// `true` / `false`.
    Bool(bool),
    /// An integer (`N` suffix accepted).
    Int(i64),
    /// A float (`M` suffix accepted).
    Float(f64),
    /// A string.
    Str(String),
    /// A character literal such as `\a`, kept as its text.
    Char(String),
    /// A keyword, without its leading colon.
    Keyword(String),
    /// A symbol.
    Symbol(String),
    /// `[...]`.
    Vector(Vec<Edn>),
    /// `(...)`.
    List(Vec<Edn>),
    /// `#{...}`.
    Set(Vec<Edn>),
    /// `{...}`, in source order.
    Map(Vec<(Edn, Edn)>),
    /// `#tag value`.
    Tagged(String, Box<Edn>),
}

/// A history that is not valid EDN or not a Jepsen Kafka history.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EdnError(pub String);

impl fmt::Display for EdnError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for EdnError {}

fn err<T>(msg: impl Into<String>) -> Result<T, EdnError> {
    Err(EdnError(msg.into()))
}

struct Parser<'a> {
    src: &'a [u8],
    pos: usize,
}

fn is_delimiter(b: u8) -> bool {
    b.is_ascii_whitespace()
        || matches!(
            b,
            b',' | b'(' | b')' | b'[' | b']' | b'{' | b'}' | b'"' | b';'
        )
}

impl<'a> Parser<'a> {
    fn skip_space(&mut self) {
        while let Some(&b) = self.src.get(self.pos) {
            if b.is_ascii_whitespace() || b == b',' {
                self.pos += 1;
            } else if b == b';' {
                while self.src.get(self.pos).is_some_and(|&b| b != b'\n') {
                    self.pos += 1;
                }
            } else {
                break;
            }
        }
    }

    fn token(&mut self) -> &'a str {
        let start = self.pos;
        while self.src.get(self.pos).is_some_and(|&b| !is_delimiter(b)) {
            self.pos += 1;
        }
        std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("")
    }

    fn seq(&mut self, close: u8, depth: usize) -> Result<Vec<Edn>, EdnError> {
        let mut items = Vec::new();
        loop {
            self.skip_space();
            match self.src.get(self.pos) {
                None => {
                    return err(format!(
                        "unterminated collection, expected '{}'",
                        close as char
                    ))
                }
                Some(&b) if b == close => {
                    self.pos += 1;
                    return Ok(items);
                }
                Some(_) => {
                    if let Some(item) = self.value(depth + 1)? {
                        items.push(item);
                    }
                }
            }
        }
    }

    fn string(&mut self) -> Result<Edn, EdnError> {
        let mut out = String::new();
        let mut bytes = Vec::new();
        loop {
            let Some(&b) = self.src.get(self.pos) else {
                return err("unterminated string");
            };
            self.pos += 1;
            match b {
                b'"' => break,
                b'\\' => {
                    let Some(&e) = self.src.get(self.pos) else {
                        return err("unterminated string");
                    };
                    self.pos += 1;
                    let c = match e {
                        b'n' => b'\n',
                        b't' => b'\t',
                        b'r' => b'\r',
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'u' => {
                            let hex = self
                                .src
                                .get(self.pos..self.pos + 4)
                                .ok_or(EdnError("bad \\u escape".into()))?;
                            self.pos += 4;
                            let code =
                                u32::from_str_radix(std::str::from_utf8(hex).unwrap_or("x"), 16)
                                    .map_err(|_| EdnError("bad \\u escape".into()))?;
                            let ch = char::from_u32(code).unwrap_or('\u{fffd}');
                            let mut buf = [0u8; 4];
                            bytes.extend_from_slice(ch.encode_utf8(&mut buf).as_bytes());
                            continue;
                        }
                        other => other,
                    };
                    bytes.push(c);
                }
                _ => bytes.push(b),
            }
        }
        out.push_str(&String::from_utf8_lossy(&bytes));
        Ok(Edn::Str(out))
    }

    /// Reads one value; `None` for a `#_` discarded form.
    fn value(&mut self, depth: usize) -> Result<Option<Edn>, EdnError> {
        if depth > DEPTH_MAX {
            return err("EDN nested too deeply");
        }
        self.skip_space();
        let Some(&b) = self.src.get(self.pos) else {
            return err("unexpected end of input");
        };
        let v = match b {
            b'[' => {
                self.pos += 1;
                Edn::Vector(self.seq(b']', depth)?)
            }
            b'(' => {
                self.pos += 1;
                Edn::List(self.seq(b')', depth)?)
            }
            b'{' => {
                self.pos += 1;
                let items = self.seq(b'}', depth)?;
                if items.len() % 2 != 0 {
                    return err("map with an odd number of forms");
                }
                let mut it = items.into_iter();
                let mut pairs = Vec::new();
                while let (Some(k), Some(v)) = (it.next(), it.next()) {
                    pairs.push((k, v));
                }
                Edn::Map(pairs)
            }
            b'"' => {
                self.pos += 1;
                self.string()?
            }
            b'\\' => {
                self.pos += 1;
                let t = self.token();
                Edn::Char(if t.is_empty() {
                    self.next_char()
                } else {
                    t.to_string()
                })
            }
            b':' => {
                self.pos += 1;
                Edn::Keyword(self.token().to_string())
            }
            b'#' => {
                self.pos += 1;
                match self.src.get(self.pos) {
                    Some(b'{') => {
                        self.pos += 1;
                        Edn::Set(self.seq(b'}', depth)?)
                    }
                    Some(b'_') => {
                        self.pos += 1;
                        self.value(depth + 1)?;
                        return Ok(None);
                    }
                    _ => {
                        let tag = self.token().to_string();
                        match self.value(depth + 1)? {
                            Some(inner) => Edn::Tagged(tag, Box::new(inner)),
                            None => return err(format!("tag #{tag} without a value")),
                        }
                    }
                }
            }
            b')' | b']' | b'}' => {
                return err(format!("unexpected '{}' at byte {}", b as char, self.pos))
            }
            _ => atom(self.token())?,
        };
        Ok(Some(v))
    }

    fn next_char(&mut self) -> String {
        let rest = std::str::from_utf8(&self.src[self.pos..]).unwrap_or("");
        let c = rest.chars().next().map(String::from).unwrap_or_default();
        self.pos += c.len();
        c
    }
}

fn atom(t: &str) -> Result<Edn, EdnError> {
    match t {
        "" => return err("empty token"),
        "nil" => return Ok(Edn::Nil),
        "true" => return Ok(Edn::Bool(true)),
        "false" => return Ok(Edn::Bool(false)),
        _ => {}
    }
    let first = t.as_bytes()[0];
    let numeric = first.is_ascii_digit()
        || ((first == b'-' || first == b'+')
            && t.as_bytes().get(1).is_some_and(u8::is_ascii_digit));
    if !numeric {
        return Ok(Edn::Symbol(t.to_string()));
    }
    let int = t.strip_suffix('N').unwrap_or(t);
    if let Ok(i) = int.parse::<i64>() {
        return Ok(Edn::Int(i));
    }
    let float = t.strip_suffix('M').unwrap_or(t);
    float
        .parse::<f64>()
        .map(Edn::Float)
        .map_err(|_| EdnError(format!("bad number {t:?}")))
}

/// Parses every top-level form of `text`.
pub fn parse_all(text: &str) -> Result<Vec<Edn>, EdnError> {
    let mut p = Parser {
        src: text.as_bytes(),
        pos: 0,
    };
    let mut out = Vec::new();
    loop {
        p.skip_space();
        if p.pos >= p.src.len() {
            return Ok(out);
        }
        if let Some(v) = p.value(0)? {
            out.push(v);
        }
    }
}

fn write_str(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c => out.push(c),
        }
    }
    out.push('"');
}

fn write_seq(items: &[Edn], open: &str, close: char, out: &mut String) {
    out.push_str(open);
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        item.write(out);
    }
    out.push(close);
}

impl Edn {
    /// Appends the EDN text of this value.
    pub fn write(&self, out: &mut String) {
        match self {
            Edn::Nil => out.push_str("nil"),
            Edn::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
            Edn::Int(i) => {
                let _ = write!(out, "{i}");
            }
            Edn::Float(f) if f.is_finite() => {
                let _ = write!(out, "{f:?}");
            }
            Edn::Float(_) => out.push_str("nil"),
            Edn::Str(s) => write_str(s, out),
            Edn::Char(c) => {
                out.push('\\');
                out.push_str(c);
            }
            Edn::Keyword(k) => {
                out.push(':');
                out.push_str(k);
            }
            Edn::Symbol(s) => out.push_str(s),
            Edn::Vector(items) => write_seq(items, "[", ']', out),
            Edn::List(items) => write_seq(items, "(", ')', out),
            Edn::Set(items) => write_seq(items, "#{", '}', out),
            Edn::Map(pairs) => {
                out.push('{');
                for (i, (k, v)) in pairs.iter().enumerate() {
                    if i > 0 {
                        out.push_str(", ");
                    }
                    k.write(out);
                    out.push(' ');
                    v.write(out);
                }
                out.push('}');
            }
            Edn::Tagged(tag, v) => {
                out.push('#');
                out.push_str(tag);
                out.push(' ');
                v.write(out);
            }
        }
    }

    /// The EDN text of this value.
    pub fn to_edn_string(&self) -> String {
        let mut s = String::new();
        self.write(&mut s);
        s
    }

    fn get(&self, keyword: &str) -> Option<&Edn> {
        match self {
            Edn::Map(pairs) => pairs
                .iter()
                .find(|(k, _)| matches!(k, Edn::Keyword(name) if name == keyword))
                .map(|(_, v)| v),
            Edn::Tagged(_, inner) => inner.get(keyword),
            _ => None,
        }
    }

    fn items(&self) -> Option<&[Edn]> {
        match self {
            Edn::Vector(v) | Edn::List(v) | Edn::Set(v) => Some(v),
            _ => None,
        }
    }

    /// Converts to JSON: keywords and symbols become strings, sets and lists arrays, map keys
    /// strings (non-string keys as their EDN text), tags are dropped.
    pub fn to_json(&self) -> Value {
        match self {
            Edn::Nil => Value::Null,
            Edn::Bool(b) => Value::Bool(*b),
            Edn::Int(i) => Value::from(*i),
            Edn::Float(f) => Number::from_f64(*f).map_or(Value::Null, Value::Number),
            Edn::Str(s) | Edn::Char(s) | Edn::Keyword(s) | Edn::Symbol(s) => {
                Value::String(s.clone())
            }
            Edn::Vector(v) | Edn::List(v) | Edn::Set(v) => {
                Value::Array(v.iter().map(Edn::to_json).collect())
            }
            Edn::Map(pairs) => Value::Object(
                pairs
                    .iter()
                    .map(|(k, v)| (k.as_text(), v.to_json()))
                    .collect(),
            ),
            Edn::Tagged(_, v) => v.to_json(),
        }
    }

    /// Converts JSON to EDN: objects become maps with string keys.
    pub fn from_json(v: &Value) -> Edn {
        match v {
            Value::Null => Edn::Nil,
            Value::Bool(b) => Edn::Bool(*b),
            Value::Number(n) => n
                .as_i64()
                .map_or_else(|| Edn::Float(n.as_f64().unwrap_or(0.0)), Edn::Int),
            Value::String(s) => Edn::Str(s.clone()),
            Value::Array(a) => Edn::Vector(a.iter().map(Edn::from_json).collect()),
            Value::Object(m) => Edn::Map(
                m.iter()
                    .map(|(k, v)| (Edn::Str(k.clone()), Edn::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// Strings, keywords and symbols as their name; anything else as its EDN text.
    fn as_text(&self) -> String {
        match self {
            Edn::Str(s) | Edn::Keyword(s) | Edn::Symbol(s) => s.clone(),
            other => other.to_edn_string(),
        }
    }
}

/// How Jepsen's integer keys map to Tidewater's `topic/partition` keys.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyMapping {
    /// Topic names are this prefix followed by a number: `t` gives `t0`, `t1`, ...
    pub topic_prefix: String,
    /// Partitions per topic: key `k` is partition `k % partitions` of topic `k / partitions`.
    pub partitions: u32,
}

impl Default for KeyMapping {
    /// `t{k}/0`: one partition per topic, as Jepsen's Kafka workload creates.
    fn default() -> Self {
        KeyMapping {
            topic_prefix: "t".into(),
            partitions: 1,
        }
    }
}

impl KeyMapping {
    /// Jepsen key -> Tidewater key.
    pub fn to_tidewater(&self, k: i64) -> String {
        let n = self.partitions.max(1) as i64;
        format!(
            "{}{}/{}",
            self.topic_prefix,
            k.div_euclid(n),
            k.rem_euclid(n)
        )
    }

    /// Tidewater key -> Jepsen key, when the key follows the mapping.
    pub fn to_jepsen(&self, key: &str) -> Option<i64> {
        let rest = key.strip_prefix(&self.topic_prefix)?;
        let (topic, partition) = rest.split_once('/')?;
        let (topic, partition): (i64, i64) = (topic.parse().ok()?, partition.parse().ok()?);
        let n = self.partitions.max(1) as i64;
        (partition < n && topic >= 0 && partition >= 0).then_some(topic * n + partition)
    }

    fn key_from_edn(&self, e: &Edn) -> Result<String, EdnError> {
        match e {
            Edn::Int(k) => Ok(self.to_tidewater(*k)),
            Edn::Str(s) | Edn::Keyword(s) => Ok(s.clone()),
            other => err(format!("bad key {}", other.to_edn_string())),
        }
    }

    fn key_to_edn(&self, key: &str) -> Edn {
        self.to_jepsen(key)
            .map_or_else(|| Edn::Str(key.to_string()), Edn::Int)
    }
}

fn int(e: &Edn, what: &str) -> Result<i64, EdnError> {
    match e {
        Edn::Int(i) => Ok(*i),
        other => err(format!(
            "{what} must be an integer, got {}",
            other.to_edn_string()
        )),
    }
}

fn u64_of(e: &Edn, what: &str) -> Result<u64, EdnError> {
    u64::try_from(int(e, what)?).map_err(|_| EdnError(format!("{what} must not be negative")))
}

fn micro_from_edn(m: &Edn, keys: &KeyMapping) -> Result<Value, EdnError> {
    let items = m
        .items()
        .ok_or_else(|| EdnError(format!("micro-op must be a vector: {}", m.to_edn_string())))?;
    match items.first() {
        Some(Edn::Keyword(f)) if f == "send" => {
            let key =
                keys.key_from_edn(items.get(1).ok_or(EdnError("send without key".into()))?)?;
            let v = match items.get(2) {
                Some(Edn::Vector(pair)) if pair.len() == 2 => {
                    let offset = match &pair[0] {
                        Edn::Nil => Value::Null,
                        o => Value::from(u64_of(o, "offset")?),
                    };
                    Value::Array(vec![offset, Value::from(int(&pair[1], "value")?)])
                }
                Some(v) => Value::from(int(v, "value")?),
                None => return err("send without value"),
            };
            Ok(Value::Array(vec!["send".into(), key.into(), v]))
        }
        Some(Edn::Keyword(f)) if f == "poll" => match items.get(1) {
            None | Some(Edn::Nil) => Ok(serde_json::json!(["poll"])),
            Some(Edn::Map(pairs)) => {
                let mut out = Map::new();
                for (k, recs) in pairs {
                    let recs = recs
                        .items()
                        .ok_or(EdnError("poll records must be a vector".into()))?;
                    let mut list = Vec::with_capacity(recs.len());
                    for r in recs {
                        match r.items() {
                            Some([o, v]) => list
                                .push(serde_json::json!([u64_of(o, "offset")?, int(v, "value")?])),
                            _ => return err(format!("bad poll record {}", r.to_edn_string())),
                        }
                    }
                    out.insert(keys.key_from_edn(k)?, Value::Array(list));
                }
                Ok(Value::Array(vec!["poll".into(), Value::Object(out)]))
            }
            Some(other) => err(format!("bad poll result {}", other.to_edn_string())),
        },
        _ => Ok(m.to_json()),
    }
}

fn key_map_from_edn(e: &Edn, keys: &KeyMapping) -> Result<BTreeMap<String, u64>, EdnError> {
    let Edn::Map(pairs) = e else {
        return err("expected a map of key -> integer");
    };
    pairs
        .iter()
        .map(|(k, v)| Ok((keys.key_from_edn(k)?, u64_of(v, "map value")?)))
        .collect()
}

/// Converts one Jepsen op map into an [`Op`]; `position` is its index when `:index` is absent.
pub fn op_from_edn(e: &Edn, keys: &KeyMapping, position: u64) -> Result<Op, EdnError> {
    let field = |name: &str| e.get(name);
    let kind = match field("type") {
        Some(Edn::Keyword(t)) => match t.as_str() {
            "invoke" => OpType::Invoke,
            "ok" => OpType::Ok,
            "fail" => OpType::Fail,
            "info" => OpType::Info,
            other => return err(format!("unknown op type :{other}")),
        },
        _ => return err(format!("op without :type: {}", e.to_edn_string())),
    };
    let process = match field("process") {
        Some(Edn::Int(p)) if *p >= 0 => Process::Client(*p as u64),
        Some(Edn::Keyword(_) | Edn::Symbol(_) | Edn::Str(_)) => Process::Nemesis,
        other => return err(format!("bad :process {:?}", other.map(Edn::to_edn_string))),
    };
    let f = match field("f") {
        Some(f) => f.as_text(),
        None => return err("op without :f"),
    };
    let value = match (field("value"), process, f.as_str()) {
        (None | Some(Edn::Nil), _, _) => Value::Null,
        (Some(v), Process::Client(_), "send" | "poll" | "txn") => match v.items() {
            Some(micros) => Value::Array(
                micros
                    .iter()
                    .map(|m| micro_from_edn(m, keys))
                    .collect::<Result<_, _>>()?,
            ),
            None => v.to_json(),
        },
        (Some(v), Process::Client(_), "assign" | "subscribe") => match v.items() {
            Some(ks) => Value::Array(
                ks.iter()
                    .map(|k| keys.key_from_edn(k).map(Value::from))
                    .collect::<Result<_, _>>()?,
            ),
            None => v.to_json(),
        },
        (Some(v), _, _) => v.to_json(),
    };
    let opt_map = |name: &str| {
        field(name)
            .filter(|v| **v != Edn::Nil)
            .map(|v| key_map_from_edn(v, keys))
            .transpose()
    };
    Ok(Op {
        index: field("index")
            .map(|i| u64_of(i, ":index"))
            .transpose()?
            .unwrap_or(position),
        time: field("time")
            .map(|t| u64_of(t, ":time"))
            .transpose()?
            .unwrap_or(0),
        process,
        kind,
        f,
        value,
        node: field("node").filter(|v| **v != Edn::Nil).map(Edn::as_text),
        high_watermarks: opt_map("high-watermarks")?,
        log_start_offsets: opt_map("log-start-offsets")?,
        isr_sizes: opt_map("isr-sizes")?,
        error: field("error").filter(|v| **v != Edn::Nil).map(Edn::as_text),
        r#final: matches!(
            field("final?").or_else(|| field("final")),
            Some(Edn::Bool(true))
        ),
        txn_end: field("txn-end")
            .filter(|v| **v != Edn::Nil)
            .map(|v| serde_json::from_value(v.to_json()))
            .transpose()
            .map_err(|e| EdnError(format!("bad :txn-end: {e}")))?,
    })
}

fn micro_to_edn(m: &Value, keys: &KeyMapping) -> Edn {
    let Some(arr) = m.as_array() else {
        return Edn::from_json(m);
    };
    match arr.first().and_then(Value::as_str) {
        Some("send") if arr.len() == 3 => {
            let key = arr[1]
                .as_str()
                .map_or_else(|| Edn::from_json(&arr[1]), |k| keys.key_to_edn(k));
            Edn::Vector(vec![
                Edn::Keyword("send".into()),
                key,
                Edn::from_json(&arr[2]),
            ])
        }
        Some("poll") => {
            let mut items = vec![Edn::Keyword("poll".into())];
            if let Some(Value::Object(recs)) = arr.get(1) {
                items.push(Edn::Map(
                    recs.iter()
                        .map(|(k, v)| (keys.key_to_edn(k), Edn::from_json(v)))
                        .collect(),
                ));
            }
            Edn::Vector(items)
        }
        _ => Edn::from_json(m),
    }
}

fn key_map_to_edn(m: &BTreeMap<String, u64>, keys: &KeyMapping) -> Edn {
    Edn::Map(
        m.iter()
            .map(|(k, v)| (keys.key_to_edn(k), Edn::Int(*v as i64)))
            .collect(),
    )
}

/// Converts an [`Op`] into a Jepsen op map.
pub fn op_to_edn(op: &Op, keys: &KeyMapping) -> Edn {
    let kw = |s: &str| Edn::Keyword(s.to_string());
    let kind = match op.kind {
        OpType::Invoke => "invoke",
        OpType::Ok => "ok",
        OpType::Fail => "fail",
        OpType::Info => "info",
    };
    let process = match op.process {
        Process::Client(p) => Edn::Int(p as i64),
        Process::Nemesis => kw("nemesis"),
    };
    let value = match (&op.process, op.f.as_str(), &op.value) {
        (Process::Client(_), "send" | "poll" | "txn", Value::Array(micros)) => {
            Edn::Vector(micros.iter().map(|m| micro_to_edn(m, keys)).collect())
        }
        (Process::Client(_), "assign" | "subscribe", Value::Array(ks)) => Edn::Vector(
            ks.iter()
                .map(|k| {
                    k.as_str()
                        .map_or_else(|| Edn::from_json(k), |k| keys.key_to_edn(k))
                })
                .collect(),
        ),
        (_, _, v) => Edn::from_json(v),
    };
    let mut pairs = vec![
        (kw("index"), Edn::Int(op.index as i64)),
        (kw("time"), Edn::Int(op.time as i64)),
        (kw("type"), kw(kind)),
        (kw("process"), process),
        (kw("f"), kw(&op.f)),
        (kw("value"), value),
    ];
    if let Some(node) = &op.node {
        pairs.push((kw("node"), Edn::Str(node.clone())));
    }
    if let Some(m) = &op.high_watermarks {
        pairs.push((kw("high-watermarks"), key_map_to_edn(m, keys)));
    }
    if let Some(m) = &op.log_start_offsets {
        pairs.push((kw("log-start-offsets"), key_map_to_edn(m, keys)));
    }
    if let Some(m) = &op.isr_sizes {
        pairs.push((kw("isr-sizes"), key_map_to_edn(m, keys)));
    }
    if let Some(e) = &op.error {
        pairs.push((kw("error"), Edn::Str(e.clone())));
    }
    if op.r#final {
        pairs.push((kw("final?"), Edn::Bool(true)));
    }
    if let Some(end) = &op.txn_end {
        // A map of keyword keys, as Jepsen writes its own extensions.
        let Value::Object(fields) = serde_json::to_value(end).expect("a TxnEnd serialises") else {
            unreachable!("a TxnEnd is a JSON object");
        };
        let pairs_end = fields
            .iter()
            .map(|(k, v)| (kw(k), Edn::from_json(v)))
            .collect();
        pairs.push((kw("txn-end"), Edn::Map(pairs_end)));
    }
    Edn::Map(pairs)
}

/// Reads a Jepsen history: one op map per line (or any whitespace), or one vector of maps.
pub fn read_edn_history(text: &str, keys: &KeyMapping) -> Result<Vec<Op>, EdnError> {
    let forms = parse_all(text)?;
    let ops: Vec<&Edn> = match forms.as_slice() {
        [Edn::Vector(items)] | [Edn::List(items)] => items.iter().collect(),
        forms => forms.iter().collect(),
    };
    ops.iter()
        .enumerate()
        .map(|(i, e)| {
            op_from_edn(e, keys, i as u64).map_err(|EdnError(m)| EdnError(format!("op {i}: {m}")))
        })
        .collect()
}

/// Reads a Jepsen history file (see [`read_edn_history`]).
pub fn read_edn_file(
    path: impl AsRef<std::path::Path>,
    keys: &KeyMapping,
) -> Result<Vec<Op>, EdnError> {
    let path = path.as_ref();
    let text =
        std::fs::read_to_string(path).map_err(|e| EdnError(format!("{}: {e}", path.display())))?;
    read_edn_history(&text, keys)
}

/// Writes ops as a Jepsen history, one map per line.
pub fn write_edn_history(
    ops: &[Op],
    keys: &KeyMapping,
    mut out: impl std::io::Write,
) -> std::io::Result<()> {
    let mut line = String::new();
    for op in ops {
        line.clear();
        op_to_edn(op, keys).write(&mut line);
        line.push('\n');
        out.write_all(line.as_bytes())?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checker::gen::{generate, GenConfig};

    const JEPSEN: &str = r#"
{:index 0, :time 1, :type :invoke, :process 0, :f :send, :value [[:send 1 907]]}
{:index 1, :time 2, :type :ok, :process 0, :f :send, :value [[:send 1 [16 907]]]}
{:index 2 :time 3 :type :invoke :process 2 :f :poll :value [[:poll]]}
{:index 3, :time 4, :type :ok, :process 2, :f :poll, :value [[:poll {1 [[16 903] [17 907]]}]]}
; a comment
{:index 4, :time 5, :type :info, :process :nemesis, :f :start-partition, :value {"n1" #{"n2" "n3"}}}
{:index 5, :time 6, :type :invoke, :process 3, :f :assign, :value [0 1] #_ :ignored #_ 7}
#jepsen.history.Op{:index 6, :time 7, :type :info, :process 0, :f :send, :value [[:send 1 908]], :error [:timeout "x"]}
"#;

    #[test]
    fn reads_jepsen_kafka_histories() {
        let ops = read_edn_history(JEPSEN, &KeyMapping::default()).unwrap();
        assert_eq!(ops.len(), 7);
        assert_eq!(ops[0].value, serde_json::json!([["send", "t1/0", 907]]));
        assert_eq!(
            ops[1].value,
            serde_json::json!([["send", "t1/0", [16, 907]]])
        );
        assert_eq!(
            ops[3].value,
            serde_json::json!([["poll", {"t1/0": [[16, 903], [17, 907]]}]])
        );
        assert_eq!(ops[4].process, Process::Nemesis);
        assert_eq!(ops[4].value, serde_json::json!({"n1": ["n2", "n3"]}));
        assert_eq!(ops[5].value, serde_json::json!(["t0/0", "t1/0"]));
        assert_eq!(ops[6].error.as_deref(), Some("[:timeout \"x\"]"));
        assert_eq!(ops[6].kind, OpType::Info);
        // The same ops as one vector.
        let vector = format!("[{JEPSEN}]");
        assert_eq!(
            read_edn_history(&vector, &KeyMapping::default()).unwrap(),
            ops
        );
    }

    #[test]
    fn jepsen_history_round_trips() {
        let keys = KeyMapping::default();
        let ops = read_edn_history(JEPSEN, &keys).unwrap();
        let mut text = Vec::new();
        write_edn_history(&ops, &keys, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(text.starts_with("{:index 0, :time 1, :type :invoke, :process 0, :f :send, :value [[:send 1 907]]}\n"), "{text}");
        assert_eq!(read_edn_history(&text, &keys).unwrap(), ops);
    }

    #[test]
    fn tidewater_history_round_trips_through_edn() {
        let keys = KeyMapping {
            topic_prefix: "t".into(),
            partitions: 8,
        };
        let mut ops = generate(GenConfig {
            ops: 300,
            seed: 3,
            ..Default::default()
        });
        ops[0].node = Some("n1".into());
        let mut text = Vec::new();
        write_edn_history(&ops, &keys, &mut text).unwrap();
        let back = read_edn_history(std::str::from_utf8(&text).unwrap(), &keys).unwrap();
        assert_eq!(back, ops);
        // Keys became Jepsen integers: t0/3 is 3 with eight partitions per topic.
        assert!(std::str::from_utf8(&text).unwrap().contains("[:send 3 "));
    }

    #[test]
    fn reads_files_and_names_missing_ones() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("history.edn");
        std::fs::write(&path, JEPSEN).unwrap();
        assert_eq!(
            read_edn_file(&path, &KeyMapping::default()).unwrap().len(),
            7
        );
        let err = read_edn_file(dir.path().join("nope.edn"), &KeyMapping::default()).unwrap_err();
        assert!(err.0.contains("nope.edn"), "{err}");
    }

    #[test]
    fn transactions_round_trip_both_ways() {
        // Jepsen's txn ops: sends and polls as one, a send's offset nil when unknown.
        let jepsen = r#"
{:index 0, :time 1, :type :invoke, :process 0, :f :txn, :value [[:send 1 5] [:poll] [:send 2 6]]}
{:index 1, :time 2, :type :ok, :process 0, :f :txn, :value [[:send 1 [3 5]] [:poll {1 [[2 4]], 2 []}] [:send 2 [nil 6]]]}
{:index 2, :time 3, :type :invoke, :process 1, :f :txn, :value [[:poll] [:send 1 7]]}
{:index 3, :time 4, :type :fail, :process 1, :f :txn, :value [[:poll] [:send 1 7]], :error "aborted"}
"#;
        let keys = KeyMapping::default();
        let ops = read_edn_history(jepsen, &keys).unwrap();
        assert_eq!(
            ops[1].value,
            serde_json::json!([["send", "t1/0", [3, 5]], ["poll", {"t1/0": [[2, 4]], "t2/0": []}], ["send", "t2/0", [null, 6]]])
        );
        assert_eq!((ops[3].kind, ops[3].f.as_str()), (OpType::Fail, "txn"));
        let mut text = Vec::new();
        write_edn_history(&ops, &keys, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains(
                ":f :txn, :value [[:send 1 [3 5]] [:poll {1 [[2 4]], 2 []}] [:send 2 [nil 6]]]"
            ),
            "{text}"
        );
        assert_eq!(read_edn_history(&text, &keys).unwrap(), ops);
        // A generated transactional history survives Tidewater -> EDN -> Tidewater.
        let ops = crate::checker::txn_gen::generate_txns(crate::checker::txn_gen::TxnGenConfig {
            txns: 200,
            seed: 5,
            ..Default::default()
        });
        assert!(ops
            .iter()
            .any(|op| op.f == "txn" && op.kind == OpType::Fail));
        let keys = KeyMapping {
            topic_prefix: "t".into(),
            partitions: 4,
        };
        let mut text = Vec::new();
        write_edn_history(&ops, &keys, &mut text).unwrap();
        let back = read_edn_history(std::str::from_utf8(&text).unwrap(), &keys).unwrap();
        assert_eq!(back, ops);
    }

    #[test]
    fn a_retried_commit_round_trips_as_txn_end() {
        let mut op = Op::client(
            3,
            OpType::Ok,
            "txn",
            serde_json::json!([["send", "t0/0", [4, 9]]]),
        );
        op.txn_end = Some(crate::history::TxnEnd {
            call: "commitTransaction".into(),
            attempts: 2,
            errors: vec!["TimeoutException".into()],
        });
        let keys = KeyMapping::default();
        let mut text = Vec::new();
        write_edn_history(std::slice::from_ref(&op), &keys, &mut text).unwrap();
        let text = String::from_utf8(text).unwrap();
        assert!(
            text.contains(
                r#":txn-end {:attempts 2, :call "commitTransaction", :errors ["TimeoutException"]}"#
            ),
            "{text}"
        );
        assert_eq!(read_edn_history(&text, &keys).unwrap(), vec![op]);
    }

    #[test]
    fn key_mapping_is_a_bijection_on_its_domain() {
        let keys = KeyMapping {
            topic_prefix: "t".into(),
            partitions: 3,
        };
        for k in 0..20 {
            assert_eq!(keys.to_jepsen(&keys.to_tidewater(k)), Some(k));
        }
        assert_eq!(keys.to_tidewater(7), "t2/1");
        assert_eq!(keys.to_jepsen("t0/3"), None, "partition out of range");
        assert_eq!(keys.to_jepsen("orders/0"), None);
        assert_eq!(KeyMapping::default().to_tidewater(5), "t5/0");
    }

    #[test]
    fn malformed_edn_is_an_error_not_a_panic() {
        for bad in [
            "{:a",
            "[1 2",
            "{:a 1 :b}",
            ")",
            "\"abc",
            "#",
            "{:type :ok :process 0 :f :send :value [[:send 1 \"x\"]]}",
            "{:type :weird :process 0 :f :x}",
            &"[".repeat(1000),
        ] {
            assert!(
                read_edn_history(bad, &KeyMapping::default()).is_err(),
                "{bad}"
            );
        }
    }

    #[test]
    fn edn_atoms_parse_and_print() {
        let forms =
            parse_all(r#"nil true -3 42N 1.5 "a\"b\n" \c :k sym (1 2) #inst "2020""#).unwrap();
        let printed: Vec<String> = forms.iter().map(Edn::to_edn_string).collect();
        assert_eq!(
            printed,
            [
                "nil",
                "true",
                "-3",
                "42",
                "1.5",
                r#""a\"b\n""#,
                "\\c",
                ":k",
                "sym",
                "(1 2)",
                "#inst \"2020\""
            ]
        );
    }
}
