//! The note's XML, written directly in canonical form (Canonical XML 1.0: no declaration, no
//! empty-element tags, attributes in order, text escaped as C14N escapes it). What is signed is
//! then the very bytes written: nothing re-serializes a signed note, so nothing can change it
//! after signing (a rewritten note is what SEFAZ rejects with 297).

/// An XML document being written.
#[derive(Debug, Default)]
pub(crate) struct Xml(String);

/// Text as C14N writes it: `&`, `<`, `>` and carriage returns escaped, nothing else.
pub(crate) fn text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
    out
}

/// An attribute value as C14N writes it.
fn attribute(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '"' => out.push_str("&quot;"),
            '\t' => out.push_str("&#x9;"),
            '\n' => out.push_str("&#xA;"),
            '\r' => out.push_str("&#xD;"),
            c => out.push(c),
        }
    }
    out
}

impl Xml {
    /// Opens `tag` with `attributes`, which the caller gives in canonical order (namespace
    /// declarations first, then by name).
    pub(crate) fn open(&mut self, tag: &str, attributes: &[(&str, &str)]) -> &mut Self {
        self.0.push('<');
        self.0.push_str(tag);
        for (name, value) in attributes {
            debug_assert!(!name.is_empty());
            self.0
                .push_str(&format!(" {name}=\"{}\"", attribute(value)));
        }
        self.0.push('>');
        self
    }

    /// Closes `tag`.
    pub(crate) fn close(&mut self, tag: &str) -> &mut Self {
        self.0.push_str("</");
        self.0.push_str(tag);
        self.0.push('>');
        self
    }

    /// `<tag>value</tag>`.
    pub(crate) fn leaf(&mut self, tag: &str, value: &str) -> &mut Self {
        self.open(tag, &[]);
        self.0.push_str(&text(value));
        self.close(tag)
    }

    /// `<tag>value</tag>` when there is a value.
    pub(crate) fn opt(&mut self, tag: &str, value: Option<&str>) -> &mut Self {
        if let Some(v) = value {
            self.leaf(tag, v);
        }
        self
    }

    /// Writes an element made elsewhere, as it is.
    pub(crate) fn raw(&mut self, xml: &str) -> &mut Self {
        self.0.push_str(xml);
        self
    }

    /// The document.
    pub(crate) fn finish(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_and_attributes_are_escaped_as_c14n_escapes_them() {
        let mut x = Xml::default();
        x.open("a", &[("b", "x\"<&\t")])
            .leaf("c", "1 < 2 & 3 > \"2\"")
            .leaf("d", "")
            .close("a");
        assert_eq!(
            x.finish(),
            "<a b=\"x&quot;&lt;&amp;&#x9;\"><c>1 &lt; 2 &amp; 3 &gt; \"2\"</c><d></d></a>"
        );
    }
}
