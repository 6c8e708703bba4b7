//! A brand's notification channels: where its alerts go (`channels_create`,
//! `channels_list`, `channels_delete`, `channels_test`).

use chrono::{DateTime, Utc};
use serde::{Deserialize, Serialize};
use uuid::Uuid;

wire_enum! {
    /// How a channel is sent to.
    pub enum ChannelKind ("channel kind") {
        /// A JSON body signed with HMAC-SHA256 (`res-signature`, `res-timestamp`,
        /// `res-delivery` headers).
        Webhook = "webhook",
        /// A Slack-compatible incoming webhook: `{"text": …}`.
        Slack = "slack",
    }
}

/// `channels_create` (admin keys of the whole brand).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChannelCreateRequest {
    pub brand_id: Uuid,
    /// Unique within the brand, 1–100 characters.
    pub name: String,
    pub kind: ChannelKind,
    /// Where to POST: `https://…` (or `http://`), at most 2,000 characters.
    pub url: String,
}

/// A channel as listed: where it points (scheme and host only: the rest of a Slack URL is
/// its secret) and whether it delivers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelSummary {
    pub channel_id: Uuid,
    pub brand_id: Uuid,
    pub brand_name: String,
    pub name: String,
    pub kind: ChannelKind,
    /// `https://hooks.example.com/…`.
    pub target: String,
    #[serde(with = "super::time")]
    pub created_at: DateTime<Utc>,
    pub created_by: String,
    #[serde(with = "super::time::option", default)]
    pub last_delivered_at: Option<DateTime<Utc>>,
    /// Set while its deliveries fail (from the first failure after the last success).
    #[serde(with = "super::time::option", default)]
    pub failing_since: Option<DateTime<Utc>>,
    #[serde(default)]
    pub last_error: Option<String>,
    /// Messages waiting for it.
    pub pending: i64,
}

/// `channels_create`'s answer: the channel, and a webhook's signing secret (shown once).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelCreateResponse {
    pub channel: ChannelSummary,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<String>,
}

/// `channels_list`: the channels of the brands the key administers or reads.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChannelListRequest {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub brand_id: Option<Uuid>,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelListResponse {
    pub channels: Vec<ChannelSummary>,
}

/// `channels_test`: queue a test message for one channel (admin keys).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChannelTestRequest {
    pub channel_id: Uuid,
}

/// `channels_delete`'s answer (its waiting messages go with it).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelDeleteResponse {
    pub channel_id: Uuid,
    pub deleted: bool,
}

/// `channels_test`'s answer: a test message is queued behind the channel's others.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
pub struct ChannelTestResponse {
    pub channel_id: Uuid,
    pub queued: bool,
}

/// `channels_delete` (admin keys of the whole brand).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "openapi", derive(utoipa::ToSchema))]
#[serde(deny_unknown_fields)]
pub struct ChannelDeleteRequest {
    pub channel_id: Uuid,
}
