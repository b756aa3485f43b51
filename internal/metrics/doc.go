// Package metrics holds refundd's Prometheus registry and instruments, and
// the decorators that feed them: Store (around actors.Store) and Provider
// (around actors.Provider). Values that already live elsewhere (live
// actors, the attention index, notification counts, webhook lag) are read
// at scrape time from Sources, so nothing is counted twice.
//
// Metrics, all prefixed refundd_:
//
//	http_request_duration_seconds{method,route,code}   histogram; route is the mux template, "unmatched" for 404/405
//	journal_append_duration_seconds{result}              histogram; an actor's append, queue wait and group commit included
//	journal_commit_batch_size                            histogram; appends per bbolt transaction (ObserveCommit)
//	journal_commit_duration_seconds                      histogram; the whole transaction (ObserveCommit)
//	journal_sync_duration_seconds                        histogram; its commit to disk: page writes and fsync (ObserveCommit)
//	journal_commit_errors_total                          counter
//	journal_events_total{type}                           counter; events appended, by event type
//	actors_active                                        gauge; live reservation actors
//	actor_activations_total                              counter; every activation loads its journal once
//	actor_passivations_total                             counter; activations minus live actors
//	actor_load_duration_seconds                          histogram; recovering one reservation from the journal
//	refund_transitions_total{from,to,merchant}           counter; refund state changes journaled since start ("NEW" for a new refund)
//	refunds_attention{kind}                              gauge; refunds needing attention: UNKNOWN, REJECTED, ABNORMAL, stuck (the reconciler's stuck count)
//	timers_overdue                                       gauge; due times more than OverdueAfter late (a stalled scheduler)
//	notifications_total{merchant,outcome}                counter; WeChat Pay notifications by outcome
//	provider_calls_total{op,outcome,merchant}            counter; submit/query by outcome and merchant
//	provider_call_duration_seconds{op}                   histogram
//	provider_pacing_wait_seconds{account,op}             histogram; wait for the account's turn (create, query)
//	provider_pacing_deferred_total{account,op}           counter; calls not sent: turn past their deadline
//	webhook_events_behind{endpoint}                      gauge; journal records not yet delivered or parked
//	webhook_oldest_undelivered_age_seconds{endpoint}     gauge
//	webhook_parked{endpoint}                             gauge
//	webhook_delivered_total{endpoint}                    counter
//	webhook_failed_attempts_total{endpoint}              counter
//	wechatpay_certificate_expiry_timestamp_seconds{serial,kind} gauge; NotAfter of each platform certificate (kind="platform"); none for a public key
//	wechatpay_certificate_expiring{mchid}                gauge; 1: the account verifies with certificates only and the last expires within 30 days (Options.CertificateWarning): alert on 1
//	wechatpay_certificate_download_failures_total{mchid} counter; failed platform certificate downloads (--wechatpay-download-certificates)
//	wechatpay_certificate_download_consecutive_failures{mchid} gauge; failed downloads since the last success: alert above zero
//	wechatpay_certificate_download_last_success_timestamp_seconds{mchid} gauge; last successful download
//	credentials_reload_total{result} counter; credential reloads (SIGHUP, POST /v1/admin/credentials/reload): ok, invalid (a bad file; alert on any increase), restart_required
//	build_info{version,revision,goversion}               gauge; always 1, the running build (internal/version)
//
// plus the Go runtime and process collectors.
//
// The merchant label takes only the configured merchants' names
// (Options.Merchants; "default" alone when none are given), "_other" for
// any other name and, on notifications, "_none" for ones attributed to no
// merchant. Merchant names cannot start with "_", so the series of a
// deployment are bounded by its configuration, never by its traffic.
//
// Refund states are not kept as a full gauge (that would need a journal
// scan): the states that need people are exact gauges from the attention
// index, and the flow between states is the transitions counter.
package metrics
