//! The walk over training information and device configurations.
#![forbid(unsafe_code)]

use super::*;

impl<'m> Ctx<'m> {
    /// Checks the training information: its graphs and its bindings.
    pub(super) fn training(
        &mut self,
        m: &'m ModelProto,
        main: &'m GraphProto,
        main_defs: &HashMap<&'m str, Def>,
        main_loc: &str,
        env: Env<'_, 'm>,
    ) {
        let main_inits: HashSet<&str> = main
            .initializer
            .iter()
            .filter_map(|t| t.name.as_deref())
            .chain(
                main.sparse_initializer
                    .iter()
                    .filter_map(|sp| sp.values.as_ref().and_then(|v| v.name.as_deref())),
            )
            .collect();
        let main_outputs: HashSet<&str> = main.output.iter().map(|v| s(&v.name)).collect();
        let everything = Scope {
            defs: main_defs,
            limit: usize::MAX,
            loc: main_loc,
            parent: None,
        };
        let mut update_keys: HashMap<&str, usize> = HashMap::new();
        for (t, ti) in m.training_info.iter().enumerate() {
            let tloc = format!("training_info #{t}");
            self.training_info(
                ti,
                &tloc,
                &main_inits,
                &main_outputs,
                &everything,
                env,
                &mut update_keys,
            );
        }
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn training_info(
        &mut self,
        ti: &'m TrainingInfoProto,
        tloc: &str,
        main_inits: &HashSet<&str>,
        main_outputs: &HashSet<&str>,
        main_scope: &Scope<'_, 'm>,
        env: Env<'_, 'm>,
        update_keys: &mut HashMap<&'m str, usize>,
    ) {
        // The initialization step runs on its own; it may read the state variables (the main
        // graph's initializers) but nothing else of the main graph.
        let init_only: HashMap<&'m str, Def> = main_scope
            .defs
            .iter()
            .filter(|(_, d)| matches!(d, Def::Init(_)))
            .map(|(k, d)| (*k, *d))
            .collect();
        let init_scope = Scope {
            defs: &init_only,
            limit: usize::MAX,
            loc: main_scope.loc,
            parent: None,
        };
        let mut init_outputs: HashSet<&str> = HashSet::new();
        if let Some(g) = ti.initialization.as_ref() {
            let gloc = format!("{tloc} initialization graph '{}'", s(&g.name));
            self.graph(g, &gloc, Kind::TrainingInit, Some(&init_scope), env);
            init_outputs.extend(g.output.iter().map(|v| s(&v.name)));
        }
        let mut algo_inits: HashSet<&str> = HashSet::new();
        let mut algo_outputs: HashSet<&str> = HashSet::new();
        if let Some(g) = ti.algorithm.as_ref() {
            let gloc = format!("{tloc} algorithm graph '{}'", s(&g.name));
            self.graph(g, &gloc, Kind::TrainingAlgorithm, Some(main_scope), env);
            algo_inits.extend(g.initializer.iter().filter_map(|t| t.name.as_deref()));
            algo_inits.extend(
                g.sparse_initializer
                    .iter()
                    .filter_map(|sp| sp.values.as_ref().and_then(|v| v.name.as_deref())),
            );
            algo_outputs.extend(g.output.iter().map(|v| s(&v.name)));
        }
        if !ti.initialization_binding.is_empty() && ti.initialization.is_none() {
            self.push(
                Rule::TrainingBindings,
                tloc,
                "initialization_binding is given but the initialization graph is missing".into(),
            );
        }
        let mut init_keys: HashSet<&str> = HashSet::new();
        for (k, b) in ti.initialization_binding.iter().enumerate() {
            let bloc = format!("{tloc} initialization_binding #{k}");
            let (key, value) = (s(&b.key), s(&b.value));
            if !init_keys.insert(key) {
                self.push(
                    Rule::TrainingBindings,
                    bloc.clone(),
                    format!("key '{key}' is bound more than once"),
                );
            }
            if !main_inits.contains(key) && !algo_inits.contains(key) {
                self.push(
                    Rule::TrainingBindings,
                    bloc.clone(),
                    format!("key '{key}' is not an initializer of the main or algorithm graph"),
                );
            }
            if ti.initialization.is_some() && !init_outputs.contains(value) {
                self.push(
                    Rule::TrainingBindings,
                    bloc,
                    format!("value '{value}' is not an output of the initialization graph"),
                );
            }
        }
        for (k, b) in ti.update_binding.iter().enumerate() {
            let bloc = format!("{tloc} update_binding #{k}");
            let (key, value) = (s(&b.key), s(&b.value));
            if update_keys.insert(key, k).is_some() {
                self.push(
                    Rule::TrainingBindings,
                    bloc.clone(),
                    format!("key '{key}' is updated by more than one binding"),
                );
            }
            if !main_inits.contains(key) && !algo_inits.contains(key) {
                self.push(
                    Rule::TrainingBindings,
                    bloc.clone(),
                    format!("key '{key}' is not an initializer of the main or algorithm graph"),
                );
            }
            if !algo_outputs.contains(value) && !main_outputs.contains(value) {
                self.push(
                    Rule::TrainingBindings,
                    bloc,
                    format!("value '{value}' is not an output of the algorithm or main graph"),
                );
            }
        }
    }

    /// Checks the model's device configurations and the nodes' references to them.
    pub(super) fn device_configurations(&mut self, m: &'m ModelProto) {
        if m.configuration.is_empty() && !any_node_device_config(m) {
            return;
        }
        if !m.configuration.is_empty() {
            self.need_ir(11, "device configurations", "model");
        }
        let mut names: HashSet<&str> = HashSet::new();
        for (i, c) in m.configuration.iter().enumerate() {
            let n = s(&c.name);
            let cloc = format!("model configuration '{n}' (#{i})");
            if n.is_empty() {
                self.push(
                    Rule::DeviceConfigWellformed,
                    cloc.clone(),
                    "the configuration has no name".into(),
                );
            } else if !names.insert(n) {
                self.push(
                    Rule::DeviceConfigWellformed,
                    cloc.clone(),
                    format!("configuration name '{n}' is used more than once"),
                );
            }
            match c.num_devices {
                Some(d) if d >= 1 => {
                    if !c.device.is_empty() && c.device.len() != d as usize {
                        self.push(
                            Rule::DeviceConfigWellformed,
                            cloc,
                            format!(
                                "{} device names are given for num_devices {d}",
                                c.device.len()
                            ),
                        );
                    }
                }
                _ => self.push(
                    Rule::DeviceConfigWellformed,
                    cloc,
                    "num_devices is missing or not positive".into(),
                ),
            }
        }
        if let Some(g) = m.graph.as_ref() {
            let gloc = format!("graph '{}'", s(&g.name));
            for (i, node) in g.node.iter().enumerate() {
                for (k, dc) in node.device_configurations.iter().enumerate() {
                    let dloc = format!("{} device_configuration #{k}", node_loc(&gloc, node, i));
                    let id = s(&dc.configuration_id);
                    if !names.contains(id) {
                        self.push(
                            Rule::DeviceConfigWellformed,
                            dloc.clone(),
                            format!("configuration_id '{id}' names no model configuration"),
                        );
                    }
                    for sp in &dc.sharding_spec {
                        let t = s(&sp.tensor_name);
                        if !node.input.iter().chain(node.output.iter()).any(|x| x == t) {
                            self.push(
                                Rule::DeviceConfigWellformed,
                                dloc.clone(),
                                format!("sharding_spec tensor '{t}' is not an input or output of the node"),
                            );
                        }
                        for sd in &sp.sharded_dim {
                            if sd.axis.is_none() {
                                self.push(
                                    Rule::DeviceConfigWellformed,
                                    dloc.clone(),
                                    format!("a sharded_dim of '{t}' has no axis"),
                                );
                            }
                            for ss in &sd.simple_sharding {
                                if ss.num_shards.is_none_or(|x| x < 1) {
                                    self.push(
                                        Rule::DeviceConfigWellformed,
                                        dloc.clone(),
                                        format!(
                                            "a simple_sharding of '{t}' has no positive num_shards"
                                        ),
                                    );
                                }
                            }
                        }
                    }
                }
            }
        }
    }
}

pub(super) fn any_node_device_config(m: &ModelProto) -> bool {
    m.graph
        .as_ref()
        .is_some_and(|g| g.node.iter().any(|n| !n.device_configurations.is_empty()))
}
