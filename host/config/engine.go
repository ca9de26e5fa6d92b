package config

import (
	"net/url"
	"strings"
)

// validateEngine checks actor_rollout_ref.rollout.engine when rollout.name=openai.
func (c *Config) validateEngine(v *validator) {
	r := &c.ActorRolloutRef.Rollout
	if r.Name != "openai" {
		return
	}
	e := &r.Engine
	const p = "actor_rollout_ref.rollout.engine."
	if e.BaseURL == "" {
		v.add(p+"base_url", "actor_rollout_ref.rollout.name=openai needs actor_rollout_ref.rollout.engine.base_url (the engine's http://HOST:PORT)")
	} else {
		// a fleet: several URLs, comma-separated (docs/engines.md)
		for _, s := range strings.Split(e.BaseURL, ",") {
			s = strings.TrimSpace(s)
			if u, err := url.Parse(s); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
				v.add(p+"base_url", "actor_rollout_ref.rollout.engine.base_url: %q is not an http:// or https:// URL (several engines: comma-separated URLs)", s)
			}
		}
	}
	v.positive(p+"timeout", e.Timeout)
	v.atLeast(p+"max_retries", e.MaxRetries, 0)
	if e.UpdateWeightsURL != "" {
		v.nonEmpty(p+"update_weights_method", e.UpdateWeightsMethod)
		if e.UpdateWeightsBody != "" && !strings.Contains(e.UpdateWeightsBody, "{path}") {
			v.add(p+"update_weights_body", "actor_rollout_ref.rollout.engine.update_weights_body has no {path}: the engine would not learn where the weights are")
		}
	}
}
