//! Secrets out of what is printed: database URLs and DSNs in messages, logs and `Debug`.

/// `postgres://user:secret@host/db` → `postgres://user:***@host/db`; a `password=…` in a URL's
/// query or in a `key = value` DSN (spaces around `=` allowed, quoted or not) → `password=***`.
pub fn redact_url(url: &str) -> String {
    let mut out = match (url.find("://"), url.rfind('@')) {
        (Some(scheme), Some(at)) if at > scheme => {
            let userinfo = &url[scheme + 3..at];
            match userinfo.split_once(':') {
                Some((user, _)) => format!("{}{user}:***{}", &url[..scheme + 3], &url[at..]),
                None => url.to_string(),
            }
        }
        _ => url.to_string(),
    };
    let mut from = 0;
    while let Some(found) = out[from..].to_ascii_lowercase().find("password") {
        let after_name = from + found + "password".len();
        let rest = &out[after_name..];
        let spaces_before = rest.len() - rest.trim_start().len();
        let Some(value) = rest.trim_start().strip_prefix('=') else {
            from = after_name;
            continue;
        };
        let spaces_after = value.len() - value.trim_start().len();
        let start = after_name + spaces_before + 1 + spaces_after;
        let value = &out[start..];
        let len = if let Some(quoted) = value.strip_prefix('\'') {
            quoted.find('\'').map_or(value.len(), |end| end + 2)
        } else {
            value
                .find(|c: char| c == '&' || c.is_whitespace())
                .unwrap_or(value.len())
        };
        out.replace_range(after_name..start + len, "=***");
        from = after_name + 4;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::redact_url as redact;

    #[test]
    fn passwords_never_reach_messages() {
        assert_eq!(
            redact("postgres://pagar:s3cr3t@db.loja:5432/pagar"),
            "postgres://pagar:***@db.loja:5432/pagar"
        );
        assert_eq!(
            redact("postgres://postgres@127.0.0.1/test"),
            "postgres://postgres@127.0.0.1/test"
        );
        assert_eq!(redact("host=/tmp dbname=x"), "host=/tmp dbname=x");
        assert_eq!(
            redact("postgres://u@h/db?sslmode=disable&password=s3cr3t&x=1"),
            "postgres://u@h/db?sslmode=disable&password=***&x=1"
        );
        assert_eq!(
            redact("host=h user=u password=s3cr3t dbname=d"),
            "host=h user=u password=*** dbname=d"
        );
        assert_eq!(
            redact("host=h PASSWORD='s3 cr3t' dbname=d"),
            "host=h PASSWORD=*** dbname=d"
        );
        assert_eq!(
            redact("host=h password = s3cr3t dbname=d"),
            "host=h password=*** dbname=d"
        );
        assert_eq!(redact("user=password_owner"), "user=password_owner");
        for url in [
            "postgres://u:s3cr3t@h/d?password=s3cr3t",
            "password=s3cr3t",
            "host=h password='s3cr3t'",
            "host=h password =s3cr3t",
            "host=h password=  's3cr3t'",
            "host=h\tpassword\t=\ts3cr3t",
        ] {
            assert!(!redact(url).contains("s3cr3t"), "{url}: {}", redact(url));
        }
    }
}
