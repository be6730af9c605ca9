//! A walk over a serialized `ModelProto` that bounds, before decoding, the memory the decoded
//! message will take. Protobuf is compact: an empty `NodeProto` is two bytes on the wire and a
//! few hundred in memory, so a model of a few megabytes can decode into gigabytes, and the
//! decoder's allocations cannot fail gracefully. [`decoded_size`] reads only tags and lengths,
//! allocates nothing, and gives an upper estimate that [`super::decode`] compares with the
//! memory this process may use.
#![forbid(unsafe_code)]

use super::onnx;
use std::mem::size_of;

/// The message types whose fields the walk follows.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Model,
    Graph,
    Node,
    Attribute,
    ValueInfo,
    Tensor,
    SparseTensor,
    Type,
    TypeTensor,
    TypeSequence,
    TypeMap,
    TypeOptional,
    Shape,
    Function,
    Training,
    Annotation,
    /// Any other message (opset ids, string pairs, dimensions, device configurations, ...):
    /// its length-delimited fields are costed as packed numbers, the worst case.
    Leaf,
}

impl Kind {
    /// The decoded struct's own size.
    fn struct_size(self) -> usize {
        match self {
            Kind::Model => size_of::<onnx::ModelProto>(),
            Kind::Graph => size_of::<onnx::GraphProto>(),
            Kind::Node => size_of::<onnx::NodeProto>(),
            Kind::Attribute => size_of::<onnx::AttributeProto>(),
            Kind::ValueInfo => size_of::<onnx::ValueInfoProto>(),
            Kind::Tensor => size_of::<onnx::TensorProto>(),
            Kind::SparseTensor => size_of::<onnx::SparseTensorProto>(),
            Kind::Type
            | Kind::TypeTensor
            | Kind::TypeSequence
            | Kind::TypeMap
            | Kind::TypeOptional => size_of::<onnx::TypeProto>(),
            Kind::Shape => size_of::<onnx::TensorShapeProto>(),
            Kind::Function => size_of::<onnx::FunctionProto>(),
            Kind::Training => size_of::<onnx::TrainingInfoProto>(),
            Kind::Annotation => size_of::<onnx::TensorAnnotation>(),
            Kind::Leaf => 128,
        }
    }

    /// The message type of field `field`, when it holds a message (field numbers from
    /// `proto/onnx.proto`).
    fn child(self, field: u64) -> Option<Kind> {
        use Kind::*;
        Some(match (self, field) {
            (Model, 7) => Graph,
            (Model, 20) => Training,
            (Model, 25) => Function,
            (Model, 8 | 14 | 26) => Leaf,
            (Graph, 1) => Node,
            (Graph, 5) => Tensor,
            (Graph, 15) => SparseTensor,
            (Graph, 11..=13) => ValueInfo,
            (Graph, 14) => Annotation,
            (Graph, 16) => Leaf,
            (Node, 5) => Attribute,
            (Node, 9 | 10) => Leaf,
            (Attribute, 5 | 10) => Tensor,
            (Attribute, 6 | 11) => Graph,
            (Attribute, 22 | 23) => SparseTensor,
            (Attribute, 14 | 15) => Type,
            (ValueInfo, 2) => Type,
            (ValueInfo, 4) => Leaf,
            (Tensor, 3 | 13 | 16) => Leaf,
            (SparseTensor, 1 | 2) => Tensor,
            (Type, 1 | 8) => TypeTensor,
            (Type, 4) => TypeSequence,
            (Type, 5) => TypeMap,
            (Type, 9) => TypeOptional,
            (Type, 7) => Leaf,
            (TypeTensor, 2) => Shape,
            (TypeSequence | TypeOptional, 1) | (TypeMap, 2) => Type,
            (Shape, 1) => Leaf,
            (Function, 7) => Node,
            (Function, 11) => Attribute,
            (Function, 12) => ValueInfo,
            (Function, 9 | 14) => Leaf,
            (Training, 1 | 2) => Graph,
            (Training, 3 | 4) | (Annotation, 2) => Leaf,
            _ => return None,
        })
    }

    /// Whether length-delimited field `field` decodes to about its own size (strings and
    /// bytes); otherwise it may be a packed repeated number, up to 8 bytes per wire byte.
    fn is_bytes(self, field: u64) -> bool {
        match self {
            Kind::Tensor => matches!(field, 6 | 8 | 9 | 12),
            Kind::SparseTensor => false,
            Kind::Attribute => !matches!(field, 7 | 8),
            Kind::Leaf => false,
            _ => true,
        }
    }
}

/// Nesting deeper than this is refused by the decoder (prost's recursion limit).
pub const MAX_NESTING: usize = 100;

/// What the walk found.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WireSize {
    /// Upper estimate of the decoded message's heap and struct bytes.
    pub decoded_bytes: u64,
    /// Nodes in every graph and function.
    pub nodes: u64,
    /// Deepest message nesting.
    pub depth: usize,
}

/// Walks `bytes` as a `ModelProto`. `None` when the wire format is malformed or nested deeper
/// than [`MAX_NESTING`] (the decoder then reports the problem itself).
pub fn decoded_size(bytes: &[u8]) -> Option<WireSize> {
    let mut size = WireSize::default();
    walk(bytes, Kind::Model, 1, &mut size)?;
    size.decoded_bytes = size
        .decoded_bytes
        .saturating_add(Kind::Model.struct_size() as u64);
    // Repeated fields grow by doubling: up to twice the elements' size is allocated.
    size.decoded_bytes = size.decoded_bytes.saturating_mul(2);
    Some(size)
}

fn walk(mut bytes: &[u8], kind: Kind, depth: usize, size: &mut WireSize) -> Option<()> {
    if depth > MAX_NESTING {
        return None;
    }
    size.depth = size.depth.max(depth);
    while !bytes.is_empty() {
        let key = varint(&mut bytes)?;
        let (field, wire) = (key >> 3, key & 7);
        let cost = match wire {
            0 => {
                varint(&mut bytes)?;
                8
            }
            1 => {
                bytes = bytes.get(8..)?;
                8
            }
            5 => {
                bytes = bytes.get(4..)?;
                8
            }
            2 => {
                let len = usize::try_from(varint(&mut bytes)?).ok()?;
                let payload = bytes.get(..len)?;
                bytes = &bytes[len..];
                match kind.child(field) {
                    Some(child) => {
                        if child == Kind::Node {
                            size.nodes += 1;
                        }
                        walk(payload, child, depth + 1, size)?;
                        child.struct_size() as u64
                    }
                    None if kind.is_bytes(field) => 24 + len as u64,
                    None => 24 + 8 * len as u64,
                }
            }
            _ => return None,
        };
        size.decoded_bytes = size.decoded_bytes.saturating_add(cost);
    }
    Some(())
}

/// Reads one base-128 varint.
fn varint(bytes: &mut &[u8]) -> Option<u64> {
    let mut value = 0u64;
    for i in 0..10 {
        let (&b, rest) = bytes.split_first()?;
        *bytes = rest;
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost::Message;

    fn node(op: &str) -> onnx::NodeProto {
        onnx::NodeProto {
            op_type: Some(op.into()),
            input: vec!["x".into()],
            output: vec!["y".into()],
            ..Default::default()
        }
    }

    #[test]
    fn counts_nodes_in_graphs_and_subgraphs_and_bounds_their_size() {
        let body = onnx::GraphProto {
            node: vec![node("Relu"), node("Neg")],
            ..Default::default()
        };
        let mut if_node = node("If");
        if_node.attribute.push(onnx::AttributeProto {
            name: Some("then_branch".into()),
            g: Some(body),
            ..Default::default()
        });
        let model = onnx::ModelProto {
            graph: Some(onnx::GraphProto {
                node: vec![node("Relu"), if_node],
                ..Default::default()
            }),
            ..Default::default()
        };
        let bytes = model.encode_to_vec();
        let s = decoded_size(&bytes).unwrap();
        assert_eq!(s.nodes, 4);
        // Model > graph > node > attribute > graph > node.
        assert_eq!(s.depth, 6);
        let structs = size_of::<onnx::ModelProto>()
            + 2 * size_of::<onnx::GraphProto>()
            + 4 * size_of::<onnx::NodeProto>()
            + size_of::<onnx::AttributeProto>();
        assert!(s.decoded_bytes >= structs as u64, "{s:?} < {structs}");
    }

    #[test]
    fn empty_nodes_cost_their_struct_size_not_their_two_wire_bytes() {
        // 100,000 empty NodeProtos: 2 bytes each on the wire.
        let mut graph = Vec::new();
        for _ in 0..100_000 {
            graph.extend_from_slice(&[0x0a, 0x00]);
        }
        let mut model = vec![0x3a]; // field 7 (graph), length-delimited
        let mut len = graph.len();
        while len >= 0x80 {
            model.push((len as u8) | 0x80);
            len >>= 7;
        }
        model.push(len as u8);
        model.extend_from_slice(&graph);
        let s = decoded_size(&model).unwrap();
        assert_eq!(s.nodes, 100_000);
        assert!(s.decoded_bytes >= 100_000 * size_of::<onnx::NodeProto>() as u64);
        assert!(s.decoded_bytes > 50 * model.len() as u64);
    }

    #[test]
    fn malformed_and_too_deep_input_is_left_to_the_decoder() {
        assert_eq!(decoded_size(&[0x3a, 0x05, 0x0a]), None); // length past the end
        assert_eq!(decoded_size(&[0x0b]), None); // wire type 3 (groups)
                                                 // Types nested 200 deep: TypeProto.sequence_type.elem_type...
        let mut t = onnx::TypeProto::default();
        for _ in 0..200 {
            t = onnx::TypeProto {
                value: Some(onnx::type_proto::Value::SequenceType(Box::new(
                    onnx::type_proto::Sequence {
                        elem_type: Some(Box::new(t)),
                    },
                ))),
                ..Default::default()
            };
        }
        let model = onnx::ModelProto {
            graph: Some(onnx::GraphProto {
                input: vec![onnx::ValueInfoProto {
                    name: Some("x".into()),
                    r#type: Some(t),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(decoded_size(&model.encode_to_vec()), None);
    }

    #[test]
    fn raw_data_counts_once() {
        let model = onnx::ModelProto {
            graph: Some(onnx::GraphProto {
                initializer: vec![onnx::TensorProto {
                    raw_data: Some(vec![0u8; 1 << 20]),
                    ..Default::default()
                }],
                ..Default::default()
            }),
            ..Default::default()
        };
        let s = decoded_size(&model.encode_to_vec()).unwrap();
        assert!(s.decoded_bytes >= 1 << 20);
        assert!(s.decoded_bytes < 3 << 20, "{s:?}");
    }
}
