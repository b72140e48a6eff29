//! `/runbooks`: docs/runbooks.md as a web page, compiled into the binary, so every watchdog
//! serves the runbooks of its own version, also where nothing else can be reached (an
//! air-gapped site at 3 a.m.). Each `##` section is an alert, and its heading's id is the
//! anchor GitHub would give it (the alert name in lower case): the alert rules'
//! `runbook_url` and the webhooks' links end in it.
//!
//! Rendered with pulldown-cmark, the CommonMark parser rustdoc and mdBook use, rather than by
//! hand: the runbooks are lists, tables, code blocks and inline code, and a partial
//! Markdown reader would mangle the commands people copy from them. Its HTML writer escapes
//! text; raw HTML in the source is shown as text, not passed through.

use std::sync::OnceLock;

use pulldown_cmark::{html, CowStr, Event, Options, Parser, Tag, TagEnd};

/// Where the page is served (open like the probes: see docs/http.md).
pub const RUNBOOKS_PATH: &str = "/runbooks";

const SOURCE: &str = include_str!("../../docs/runbooks.md");

/// The page, rendered once.
pub fn page() -> &'static str {
    static PAGE: OnceLock<String> = OnceLock::new();
    PAGE.get_or_init(|| render(SOURCE))
}

/// The anchor GitHub gives a heading: lower case, punctuation dropped, spaces as hyphens
/// (a repeated one gets `-1`, `-2`, ... after it; see `render`).
pub fn slug(title: &str) -> String {
    title
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || *c == ' ' || *c == '-' || *c == '_')
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

const STYLE: &str = "body{max-width:52em;margin:1em auto;padding:0 1em;\
font:16px/1.5 system-ui,sans-serif;color:#222}\
code,pre{font-family:ui-monospace,monospace;font-size:90%;background:#f3f3f3}\
pre{padding:.6em;overflow-x:auto}h2{border-top:1px solid #ccc;padding-top:.6em}\
table{border-collapse:collapse}td,th{border:1px solid #ccc;padding:.2em .5em}\
:target{background:#fff4c2}";

fn render(markdown: &str) -> String {
    let events = for_serving(Parser::new_ext(markdown, Options::ENABLE_TABLES).collect());
    let mut body = String::with_capacity(markdown.len() * 3 / 2);
    html::push_html(&mut body, events.into_iter());
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>kafka-watchdog {version} runbooks</title>\n<style>{STYLE}</style>\n</head>\n\
         <body>\n<p><small>kafka-watchdog {version}: docs/runbooks.md of this release. \
         The other pages it names are in the release's docs/ folder.</small></p>\n\
         {body}</body>\n</html>\n",
        version = env!("CARGO_PKG_VERSION"),
    )
}

/// Gives every heading the id GitHub would, shows raw HTML as text, and keeps the text of
/// links to other files without the link: the page is served alone, and a relative link
/// would lead to a page this server does not have.
fn for_serving(mut events: Vec<Event<'_>>) -> Vec<Event<'_>> {
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::with_capacity(events.len());
    let mut i = 0;
    while i < events.len() {
        let event = std::mem::replace(&mut events[i], Event::SoftBreak);
        i += 1;
        match event {
            Event::Start(Tag::Heading {
                level,
                classes,
                attrs,
                ..
            }) => {
                let title: String = events[i..]
                    .iter()
                    .take_while(|e| !matches!(e, Event::End(TagEnd::Heading(_))))
                    .filter_map(|e| match e {
                        Event::Text(t) | Event::Code(t) => Some(t.as_ref()),
                        _ => None,
                    })
                    .collect();
                let base = slug(&title);
                let mut id = base.clone();
                let mut n = 0;
                while !seen.insert(id.clone()) {
                    n += 1;
                    id = format!("{base}-{n}");
                }
                out.push(Event::Start(Tag::Heading {
                    level,
                    id: Some(CowStr::from(id)),
                    classes,
                    attrs,
                }));
            }
            Event::Html(raw) | Event::InlineHtml(raw) => out.push(Event::Text(raw)),
            Event::Start(Tag::Link { dest_url, .. })
                if !dest_url.starts_with('#') && !dest_url.contains("://") =>
            {
                // Up to the link's end (links do not nest): its text stays, the link goes.
                while i < events.len() {
                    let e = std::mem::replace(&mut events[i], Event::SoftBreak);
                    i += 1;
                    if matches!(e, Event::End(TagEnd::Link)) {
                        break;
                    }
                    out.push(e);
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The ids of the page's elements.
    fn ids(page: &str) -> BTreeSet<String> {
        page.split(" id=\"")
            .skip(1)
            .filter_map(|s| s.split('"').next())
            .map(str::to_string)
            .collect()
    }

    /// Every incident a webhook can announce links to a section the page has: each kind,
    /// in each state a broker or a controller can be in.
    #[test]
    fn every_kind_of_incident_has_its_runbook_on_the_page() {
        use crate::judge::rule::BrokerState;
        use crate::model::kind::FindingKind;
        let ids = ids(page());
        for kind in FindingKind::ALL {
            for state in BrokerState::ALL.map(Some).into_iter().chain([None]) {
                let section = kind.runbook_section(state);
                assert!(
                    ids.contains(&slug(section)),
                    "{kind} {state:?}: {section} has no section on /runbooks"
                );
            }
        }
    }

    #[test]
    fn headings_get_the_anchors_github_gives_them() {
        let page = render(
            "# The lab (`kafka-lab`)\n## KafkaBrokerZombie\n## Tests\n## Tests\n\
             ```\n# not a heading\n```\n",
        );
        assert_eq!(
            ids(&page),
            ["kafkabrokerzombie", "tests", "tests-1", "the-lab-kafka-lab"]
                .map(String::from)
                .into()
        );
        assert!(page.contains("<h2 id=\"kafkabrokerzombie\">KafkaBrokerZombie</h2>"));
    }

    #[test]
    fn text_and_raw_html_are_escaped_and_other_files_are_not_linked() {
        let page = render(
            "Do not delete `<state_dir>/spool/R/` <script>alert(1)</script>\n\n\
             See [install.md](install.md#acls), [below](#x) and [the site](https://example.com/).\n",
        );
        assert!(
            page.contains("<code>&lt;state_dir&gt;/spool/R/</code>"),
            "{page}"
        );
        assert!(
            page.contains("&lt;script&gt;alert(1)&lt;/script&gt;"),
            "{page}"
        );
        assert!(!page.contains("<script>"), "{page}");
        assert!(
            page.contains("See install.md, <a href=\"#x\">below</a>"),
            "{page}"
        );
        assert!(
            page.contains("<a href=\"https://example.com/\">the site</a>"),
            "{page}"
        );
    }
}
