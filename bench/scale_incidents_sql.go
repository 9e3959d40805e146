package bench

// The incident half's bulk load (scale_incidents_load.go), as SQL: a plan of the incidents and of
// their occurrences in two temporary tables of the loading session, then one plain
// INSERT … SELECT a table (alerts, incidents, incident_alerts, incident_events), every trigger
// firing as it does for the server's own writes. Every value is a function of the incident's
// number k and the occurrence's number j in it (hashint4 stands in for randomness), so that the
// small side and the large one have the same shape, block of 100 incidents by block:
//
//   - each block holds 1,000 occurrences: one incident of 200 alerts, four of 40, and 95 of 1 to
//     16 (the sizes of loadSizes, five times over): 10 an incident on average;
//   - the incidents of a group (alertname and namespace) recur: incident k is of group
//     (k - 1) % groups, four incidents a group, 45 days apart; its first three alerts are the
//     group's own (the same fingerprints in each of its incidents), the rest new ones (pods);
//   - triggered_at spreads the incidents' days evenly over 180 days, every weekday, the newest
//     at least two hours ago; its hour of the day is k alone (k * 7 mod 24), so that both sides
//     start occurrences in all 24 hours whatever the time the load runs at (dated, timed);
//   - the newest loadOpen incidents are open (one of three acknowledged, four snoozed), every
//     other one resolved (one in ten by hand, the rest when its last alert stopped), a fifth of
//     those older than a week archived;
//   - the timeline is what the server writes: triggered, alert_added for each occurrence,
//     assigned, acknowledged (and unacknowledged), snoozed, notes, alert_resolved for each
//     occurrence that stopped (some by expiry), resolved, in order of time.

// loadOpen is how many incidents are open, on either side: the queue is the present, and does
// not grow with the history behind it.
const loadOpen = 24

// loadSizes are the sizes of the 95 small incidents of a block (its 19 values five times over:
// 640 occurrences), after the block's one of 200 and four of 40.
const loadSizes = `ARRAY[1,1,2,2,3,3,4,4,5,5,6,7,8,9,10,12,14,16,16]`

// loadAlertNames are the groups' alert names, each with the severity its alerts carry.
const loadAlertNames = `(ARRAY['KubePodCrashLooping','KubePodNotReady','KubeDeploymentReplicasMismatch','KubeContainerWaiting',
	'KubeJobFailed','KubeHpaMaxedOut','KubePersistentVolumeFillingUp','KubeNodeNotReady','KubeMemoryOvercommit',
	'KubeCPUOvercommit','NodeFilesystemSpaceFillingUp','NodeFilesystemAlmostOutOfSpace','NodeHighNumberConntrackEntriesUsed',
	'NodeClockNotSynchronising','NodeNetworkReceiveErrs','TargetDown','PrometheusRuleFailures','AlertmanagerFailedToSendAlerts',
	'HighErrorRate','HighLatency','DiskFull','CPUThrottlingHigh','PostgresReplicationLag','PostgresTooManyConnections',
	'RedisDown','CertificateExpiringSoon','EtcdMembersDown','BlackboxProbeFailed','ServiceSLOBurnRate','KafkaConsumerLag'])`

const loadSeverities = `(ARRAY['warning','warning','warning','warning','warning','info','critical','critical','warning',
	'warning','warning','critical','warning','warning','warning','warning','critical','warning','critical','warning',
	'critical','info','warning','warning','critical','warning','critical','critical','error','warning'])`

// loadPeopleSQL names the on-call people of the load ($1 their ids, $2 their usernames), by n.
const loadPeopleSQL = `CREATE TEMP TABLE bench_people AS
	SELECT id, username, n::int AS n FROM unnest($1::bigint[], $2::text[]) WITH ORDINALITY AS p(id, username, n)`

// loadIncidentPlanSQL plans $1 incidents (a multiple of 100) among $2 people, the newest $3 of
// them open: each incident's group, size, times and what people did to it.
const loadIncidentPlanSQL = `CREATE TEMP TABLE plan_i AS
	WITH sized AS (
		SELECT k, $1::int AS n_i, $1::int / 4 AS n_g, $2::int AS n_p,
			CASE WHEN (k - 1) % 100 = 0 THEN 200 WHEN (k - 1) % 100 <= 4 THEN 40
				ELSE (` + loadSizes + `)[((k - 1) % 100 - 5) % 19 + 1] END AS size,
			hashint4(k) & 2147483647 AS h
		FROM generate_series(1, $1::int) k
	), dated AS (
		SELECT *, date_trunc('day', now() - interval '2 hours' - (n_i - k + 1) * (interval '180 days' / n_i)
				+ (h % 1000) * (interval '180 days' / n_i / 1000), 'UTC')
			+ (k * 7 % 24) * interval '1 hour' + (h % 3600) * interval '1 second' AS at
		FROM sized
	), timed AS (
		SELECT *, (k - 1) % n_g AS g, k > n_i - $3::int AS open,
			CASE WHEN at > now() - interval '2 hours' THEN at - interval '1 day' ELSE at END AS t
		FROM dated
	), planned AS (
		SELECT *,
			sum(greatest(size - 3, 0)) OVER (ORDER BY k) - greatest(size - 3, 0) AS fresh_before,
			CASE WHEN NOT open THEN least(size * interval '7 seconds' + interval '10 minutes' + (h % 21600) * interval '1 second',
				now() - t - interval '10 minutes') END AS d,
			CASE WHEN open THEN (n_i - k) % 3 = 0 ELSE k % 5 < 3 END AS ack,
			NOT open AND k % 20 = 7 AS unack,
			NOT open AND k % 10 = 3 AS manual,
			CASE WHEN open THEN (n_i - k) % 6 = 1 ELSE k % 11 = 5 END AS snoozed,
			NOT open AND k % 22 = 5 AS unsnoozed,
			CASE WHEN k % 16 = 0 THEN 2 WHEN k % 4 = 0 THEN 1 ELSE 0 END AS notes,
			CASE WHEN k % 3 = 0 THEN (k / 3) % n_p + 1 END AS assignee,
			k % n_p + 1 AS acker
		FROM timed
	)
	SELECT k, g, size, open, t, d, ack, unack, manual, snoozed, unsnoozed, notes, assignee, acker, fresh_before, n_g,
		` + loadAlertNames + `[g % 30 + 1] AS name, ` + loadSeverities + `[g % 30 + 1] AS severity,
		'ns-' || lpad((g / 30)::text, 4, '0') AS ns,
		CASE WHEN open THEN t + interval '5 minutes' ELSE t + d * 0.1 END AS ack_at,
		CASE WHEN open THEN now() - interval '30 minutes' ELSE t + d * 0.25 END AS snoozed_at,
		CASE WHEN open THEN now() + interval '2 hours' ELSE t + d * 0.25 + interval '1 hour' END AS snoozed_until,
		CASE WHEN open THEN NULL WHEN manual THEN t + d * 0.5 ELSE t + d + interval '30 seconds' END AS resolved_at,
		NOT open AND k % 5 = 4 AND t < now() - interval '7 days' AS archived
	FROM planned`

// loadOccurrencePlanSQL plans every incident's occurrences: its alert (alert_no, the alert's id),
// when it started, joined and stopped. A resolved incident's first alert stops last, when the
// incident ends; an open one's second alert has stopped (when it has three or more), the rest fire.
const loadOccurrencePlanSQL = `CREATE TEMP TABLE plan_o AS
	WITH o AS (
		SELECT i.k, j, i.g, i.name, i.severity, i.ns, i.open, i.t, i.d, i.size,
			CASE WHEN j <= 3 THEN i.g * 3 + j ELSE i.n_g * 3 + i.fresh_before + j - 3 END AS alert_no,
			i.t - interval '30 seconds' + (j - 1) * interval '7 seconds' AS starts_at,
			i.t + (j - 1) * interval '7 seconds' AS created_at,
			hashint4(i.k * 256 + j) & 1023 AS h
		FROM plan_i i, generate_series(1, i.size) j
	), ended AS (
		SELECT *,
			CASE WHEN open AND NOT (j = 2 AND size >= 3) THEN NULL
				WHEN open THEN starts_at + interval '10 minutes'
				WHEN j = 1 THEN t + d
				ELSE starts_at + (t + d - starts_at) * (0.5 + h / 2046.0) END AS ends_at,
			CASE WHEN open AND NOT (j = 2 AND size >= 3) THEN NULL
				WHEN NOT open AND h % 23 = 0 THEN 'expiry' ELSE 'alertmanager' END AS source
		FROM o
	)
	SELECT k, j, g, name, severity, ns, alert_no, starts_at, created_at, ends_at, source,
		CASE WHEN source IS NULL THEN 'firing' ELSE 'resolved' END AS status,
		CASE WHEN source IS NULL THEN now()
			WHEN source = 'expiry' THEN greatest(starts_at, ends_at - interval '4 hours 30 minutes')
			ELSE ends_at END AS last_seen_at,
		CASE WHEN j <= 3 THEN ns || '-api-' || j ELSE ns || '-worker-' || substr(md5(alert_no::text), 1, 10) END AS pod
	FROM ended`

// loadAlertsSQL writes each alert's row ($1 the integration) as of its newest occurrence.
const loadAlertsSQL = `INSERT INTO alerts (id, integration_id, fingerprint, name, status, labels, annotations, starts_at,
		ends_at, generator_url, received_at, resolution_source, incident_id)
	OVERRIDING SYSTEM VALUE
	SELECT DISTINCT ON (alert_no) alert_no, $1::bigint, substr(md5('terdut bench alert ' || alert_no), 1, 16), name, status,
		jsonb_build_object('alertname', name, 'namespace', ns, 'severity', severity, 'pod', pod, 'container', 'app',
			'cluster', 'prod-eu-1', 'job', 'kube-state-metrics', 'prometheus', 'monitoring/k8s'),
		jsonb_build_object('summary', name || ' on ' || ns || '/' || pod,
			'description', 'Pod ' || ns || '/' || pod || ' (container app) has been in this state for more than 15 minutes. '
				|| 'See the runbook, and the dashboards of ' || ns || ' for what changed before it started.',
			'runbook_url', 'https://runbooks.example.com/alerts/' || lower(name),
			'value', round((alert_no % 1000) / 10.0, 1)::text),
		starts_at, ends_at, 'http://prometheus.monitoring.svc:9090/graph?g0.expr=ALERTS%7Balertname%3D%22' || name || '%22%7D&g0.tab=1',
		CASE WHEN status = 'firing' THEN now() WHEN source = 'expiry' THEN last_seen_at ELSE ends_at + interval '30 seconds' END,
		source, k
	FROM plan_o ORDER BY alert_no, k DESC`

// loadIncidentsSQL writes the incidents ($1 the integration).
const loadIncidentsSQL = `INSERT INTO incidents (id, integration_id, group_key, title, group_labels, status, severity,
		severity_rank, triggered_at, acknowledged_by_id, acknowledged_at, first_acknowledged_at, assigned_to_id, snoozed_until,
		resolved_at, resolution_source, archived_at, alert_count)
	OVERRIDING SYSTEM VALUE
	SELECT k, $1::bigint, '{}:{alertname="' || name || '", namespace="' || ns || '"}', name || ' (namespace=' || ns || ')',
		jsonb_build_object('alertname', name, 'namespace', ns),
		CASE WHEN NOT open THEN 'resolved' WHEN ack THEN 'acknowledged' ELSE 'triggered' END,
		severity, CASE severity WHEN 'critical' THEN 4 WHEN 'error' THEN 3 WHEN 'warning' THEN 2 WHEN 'info' THEN 1 ELSE 0 END,
		t, CASE WHEN ack THEN a.id END,
		CASE WHEN ack AND unack THEN t + d * 0.2 WHEN ack THEN ack_at END, CASE WHEN ack THEN ack_at END,
		s.id, CASE WHEN snoozed AND NOT unsnoozed THEN snoozed_until END,
		resolved_at, CASE WHEN open THEN NULL WHEN manual THEN 'manual' ELSE 'alerts' END,
		CASE WHEN archived THEN resolved_at + interval '1 day' END, size
	FROM plan_i i JOIN bench_people a ON a.n = i.acker LEFT JOIN bench_people s ON s.n = i.assignee
	ORDER BY k`

// loadOccurrencesSQL writes the occurrences, in order of incident and join.
const loadOccurrencesSQL = `INSERT INTO incident_alerts (incident_id, alert_id, group_key, starts_at, status, ends_at,
		resolution_source, last_seen_at, created_at)
	SELECT k, alert_no, '{}:{alertname="' || name || '", namespace="' || ns || '"}', starts_at, status, ends_at, source,
		last_seen_at, created_at
	FROM plan_o ORDER BY k, j`

// loadEventsSQL writes the timelines, in order of time (a timeline reads in order of id).
const loadEventsSQL = `INSERT INTO incident_events (incident_id, type, user_id, username, alert_id, detail, created_at)
	SELECT e.k, e.type, p.id, coalesce(p.username, ''), e.alert_id, e.detail, e.at FROM (
		SELECT k, 0 AS ord, 0 AS j, 'triggered' AS type, NULL::int AS who, NULL::bigint AS alert_id, '' AS detail, t AS at
		FROM plan_i
		UNION ALL
		SELECT k, 1, j, 'alert_added', NULL, alert_no, '', created_at FROM plan_o WHERE j <= 200
		UNION ALL
		SELECT k, 2, 0, 'assigned', assignee, NULL, '', t + interval '2 seconds' FROM plan_i WHERE assignee IS NOT NULL
		UNION ALL
		SELECT k, 3, 0, 'acknowledged', acker, NULL, '', ack_at FROM plan_i WHERE ack
		UNION ALL
		SELECT k, 3, 1, 'unacknowledged', acker, NULL, '', t + d * 0.15 FROM plan_i WHERE unack
		UNION ALL
		SELECT k, 3, 2, 'acknowledged', acker, NULL, '', t + d * 0.2 FROM plan_i WHERE unack
		UNION ALL
		SELECT k, 4, 0, 'snoozed', acker, NULL, to_char(snoozed_until AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'), snoozed_at
		FROM plan_i WHERE snoozed
		UNION ALL
		SELECT k, 4, 1, 'unsnoozed', acker, NULL, '', t + d * 0.3 FROM plan_i WHERE unsnoozed
		UNION ALL
		SELECT k, 5, n, 'note', acker, NULL,
			CASE n WHEN 1 THEN 'Looking into it: ' || name || ' in ' || ns || ' again. Rolled back the last deploy, watching.'
				ELSE 'Root cause: the node pool ran out of memory; raised the limits and opened a ticket.' END,
			CASE WHEN open THEN t + n * interval '10 minutes' ELSE t + d * (0.2 + 0.2 * n) END
		FROM plan_i, generate_series(1, notes) n
		UNION ALL
		SELECT k, 6, j, 'alert_resolved', NULL, alert_no,
			CASE WHEN source = 'expiry' THEN 'expired: not reported for its integration''s expire_after' ELSE '' END,
			ends_at + interval '30 seconds'
		FROM plan_o WHERE status = 'resolved'
		UNION ALL
		SELECT k, 7, 0, 'resolved', CASE WHEN manual THEN acker END, NULL, '', resolved_at FROM plan_i WHERE NOT open
	) e LEFT JOIN bench_people p ON p.n = e.who
	ORDER BY e.at, e.k, e.ord, e.j`

// loadIdentitiesSQL moves the identities past the ids the load gave.
const loadIdentitiesSQL = `SELECT setval(pg_get_serial_sequence('alerts', 'id'), (SELECT max(id) FROM alerts)),
	setval(pg_get_serial_sequence('incidents', 'id'), (SELECT max(id) FROM incidents))`
