//! `resctl channels`: a brand's notification channels as text.

use chrono::{DateTime, Utc};
use res_shared::untrusted::Untrusted;
use res_shared::wire::{ChannelCreateResponse, ChannelSummary};

use crate::render::{relative, table, when};

/// One row a channel: where it points and whether it delivers.
pub(crate) fn list(channels: &[ChannelSummary], now: DateTime<Utc>) -> String {
    if channels.is_empty() {
        return "no notification channels\n".to_owned();
    }
    let rows: Vec<Vec<String>> = channels
        .iter()
        .map(|c| {
            vec![
                c.channel_id.to_string(),
                Untrusted(&c.brand_name).to_string(),
                Untrusted(&c.name).to_string(),
                c.kind.as_str().to_owned(),
                c.target.clone(),
                state(c, now),
                c.pending.to_string(),
                when(c.last_delivered_at, now),
            ]
        })
        .collect();
    table(
        &[
            "ID",
            "BRAND",
            "NAME",
            "KIND",
            "TARGET",
            "STATE",
            "WAITING",
            "LAST SENT",
        ],
        &rows,
    )
}

/// `ok`, or `failing since 3 min ago: the channel answered 503 …`.
fn state(channel: &ChannelSummary, now: DateTime<Utc>) -> String {
    match channel.failing_since {
        None => "ok".to_owned(),
        Some(since) => format!(
            "failing since {}: {}",
            relative(since, now),
            Untrusted(channel.last_error.as_deref().unwrap_or("-"))
        ),
    }
}

/// The created channel, and a webhook's secret with how to use it.
pub(crate) fn created(answer: &ChannelCreateResponse) -> String {
    let c = &answer.channel;
    let mut out = format!(
        "created: {} ({}, {} → {})\n",
        c.channel_id,
        Untrusted(&c.name),
        c.kind.as_str(),
        c.target
    );
    if let Some(secret) = &answer.secret {
        out.push_str(&format!(
            "signing secret (shown once; verify res-signature with it): {secret}\n"
        ));
    }
    out
}
