package api

import (
	"time"

	"github.com/terdut-server/terdut-server/internal/store"
)

// The incident domain's answers, field for field as terdut-tui decodes them
// (../shared/incident-contract.md): optional fields are omitted, never null, except ends_at,
// which is present and null while an alert fires; lists are [], never null.

type alertJSON struct {
	ID               int64             `json:"id"`
	Fingerprint      string            `json:"fingerprint"`
	Name             string            `json:"name"`
	Status           string            `json:"status"`
	Labels           map[string]string `json:"labels"`
	Annotations      map[string]string `json:"annotations"`
	StartsAt         time.Time         `json:"starts_at"`
	EndsAt           *time.Time        `json:"ends_at"`
	GeneratorURL     string            `json:"generator_url"`
	ReceivedAt       time.Time         `json:"received_at"`
	ArchivedAt       *time.Time        `json:"archived_at,omitempty"`
	IncidentID       *int64            `json:"incident_id,omitempty"`
	ResolutionSource string            `json:"resolution_source,omitempty"`
}

func toAlertJSON(a store.Alert) alertJSON {
	return alertJSON{ID: a.ID, Fingerprint: a.Fingerprint, Name: a.Name, Status: a.Status, Labels: a.Labels,
		Annotations: a.Annotations, StartsAt: a.StartsAt.UTC(), EndsAt: utc(a.EndsAt), GeneratorURL: a.GeneratorURL,
		ReceivedAt: a.ReceivedAt.UTC(), ArchivedAt: utc(a.ArchivedAt), IncidentID: a.IncidentID,
		ResolutionSource: a.ResolutionSource}
}

func toAlertsJSON(alerts []store.Alert) []alertJSON {
	out := make([]alertJSON, len(alerts))
	for i, a := range alerts {
		out[i] = toAlertJSON(a)
	}
	return out
}

type incidentJSON struct {
	ID               int64             `json:"id"`
	GroupKey         string            `json:"group_key"`
	Title            string            `json:"title"`
	GroupLabels      map[string]string `json:"group_labels"`
	Status           string            `json:"status"`
	Severity         string            `json:"severity,omitempty"`
	TriggeredAt      time.Time         `json:"triggered_at"`
	AcknowledgedByID *int64            `json:"acknowledged_by_id,omitempty"`
	AcknowledgedBy   string            `json:"acknowledged_by,omitempty"`
	AcknowledgedAt   *time.Time        `json:"acknowledged_at,omitempty"`
	AssignedToID     *int64            `json:"assigned_to_id,omitempty"`
	AssignedTo       string            `json:"assigned_to,omitempty"`
	SnoozedUntil     *time.Time        `json:"snoozed_until,omitempty"`
	ResolvedAt       *time.Time        `json:"resolved_at,omitempty"`
	ResolutionSource string            `json:"resolution_source,omitempty"`
	ArchivedAt       *time.Time        `json:"archived_at,omitempty"`
}

// incidentDetailJSON is GET /api/incidents/{id}: the incident with its alerts inline, each as
// its occurrence in this incident, and how many it holds in all.
type incidentDetailJSON struct {
	incidentJSON
	Alerts     []alertJSON `json:"alerts"`
	AlertCount int         `json:"alert_count"`
}

func toIncidentJSON(in store.Incident) incidentJSON {
	return incidentJSON{ID: in.ID, GroupKey: in.GroupKey, Title: in.Title, GroupLabels: in.GroupLabels,
		Status: in.Status, Severity: in.Severity, TriggeredAt: in.TriggeredAt.UTC(),
		AcknowledgedByID: in.AcknowledgedByID, AcknowledgedBy: in.AcknowledgedBy, AcknowledgedAt: utc(in.AcknowledgedAt),
		AssignedToID: in.AssignedToID, AssignedTo: in.AssignedTo, SnoozedUntil: utc(in.SnoozedUntil),
		ResolvedAt: utc(in.ResolvedAt), ResolutionSource: in.ResolutionSource, ArchivedAt: utc(in.ArchivedAt)}
}

type incidentEventJSON struct {
	ID         int64     `json:"id"`
	IncidentID int64     `json:"incident_id"`
	Type       string    `json:"type"`
	UserID     *int64    `json:"user_id,omitempty"`
	Username   string    `json:"username,omitempty"`
	AlertID    *int64    `json:"alert_id,omitempty"`
	Detail     string    `json:"detail,omitempty"`
	CreatedAt  time.Time `json:"created_at"`
}

func toIncidentEventJSON(e store.IncidentEvent) incidentEventJSON {
	return incidentEventJSON{ID: e.ID, IncidentID: e.IncidentID, Type: e.Type, UserID: e.UserID, Username: e.Username,
		AlertID: e.AlertID, Detail: e.Detail, CreatedAt: e.CreatedAt.UTC()}
}

func utc(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}
