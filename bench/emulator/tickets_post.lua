-- wrk script: a typical ticket batch (play N plus prefetch N+1 and N+2), keyed like the SDK's requests but without
-- viewer_ref, so the emulator issues three new tickets per request instead of serving reused ones.
wrk.method = "POST"
wrk.headers["Authorization"] = "Bearer test-key"
wrk.headers["Content-Type"] = "application/json"
wrk.body = '{"episodes":[{"film_ref":"the-heiress-returns","episode_no":4,"intent":"play"},' ..
           '{"film_ref":"the-heiress-returns","episode_no":5,"intent":"prefetch"},' ..
           '{"film_ref":"the-heiress-returns","episode_no":6,"intent":"prefetch"}],' ..
           '"union_info":"bench-device","drm_kek":"bench-kek"}'
